import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Config, gitHead, resolveBuildInfo } from '../../src/config/index.ts';

/** Runs git in `cwd` with a fixed identity and no user or system configuration. */
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 'Sluice Test',
      GIT_AUTHOR_EMAIL: 'test@example.com',
      GIT_COMMITTER_NAME: 'Sluice Test',
      GIT_COMMITTER_EMAIL: 'test@example.com',
    },
  }).trim();
}

function commit(cwd: string, file: string): string {
  writeFileSync(join(cwd, file), file);
  git(cwd, 'add', file);
  git(cwd, 'commit', '-q', '-m', file);
  return git(cwd, 'rev-parse', 'HEAD');
}

describe('gitHead', () => {
  let dir: string;
  let repo: string;
  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'sluice-git-')));
    repo = join(dir, 'repo');
    git(dir, 'init', '-q', '-b', 'main', repo);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a plain checkout: its branch, loose then packed', () => {
    const head = commit(repo, 'a');
    assert.equal(gitHead(repo), head);
    git(repo, 'pack-refs', '--all');
    assert.equal(gitHead(repo), head);
  });

  test('a linked worktree, whose .git is a file: its own branch, from the shared refs', () => {
    // gitHead used to read `<worktree>/.git/HEAD`, which cannot exist when .git is a file.
    const wt = join(dir, 'feature-wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'feature', wt);
    const head = commit(wt, 'b');
    assert.notEqual(head, gitHead(repo), 'the worktree has a HEAD of its own');
    assert.equal(gitHead(wt), head);
    git(repo, 'pack-refs', '--all');
    assert.equal(gitHead(wt), head, 'packed-refs of the common dir');
    assert.equal(gitHead(repo), git(repo, 'rev-parse', 'HEAD'));
  });

  test('a detached linked worktree: the hash in its own HEAD', () => {
    const wt = join(dir, 'detached-wt');
    git(repo, 'worktree', 'add', '-q', '--detach', wt, 'main');
    const head = commit(wt, 'c');
    assert.equal(gitHead(wt), head);
  });

  test('a relative gitdir pointer is relative to the .git file', () => {
    const wt = join(dir, 'relative-wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'relative', wt);
    const head = commit(wt, 'd');
    writeFileSync(join(wt, '.git'), 'gitdir: ../repo/.git/worktrees/relative-wt\n');
    assert.equal(gitHead(wt), head);
  });

  test('no checkout, or a pointer to nowhere: undefined', () => {
    assert.equal(gitHead(dir), undefined);
    const broken = join(dir, 'broken');
    mkdirSync(broken);
    writeFileSync(join(broken, '.git'), 'gitdir: /nonexistent/worktrees/x\n');
    assert.equal(gitHead(broken), undefined);
  });
});

describe('resolveBuildInfo', () => {
  let dir: string;
  let repo: string;
  let head: string;
  const config = (commit?: string) => ({ app: { version: undefined, commit } }) as unknown as Config;
  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'sluice-build-')));
    repo = join(dir, 'repo');
    git(dir, 'init', '-q', '-b', 'main', repo);
    head = commit(repo, 'a');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("the checkout the code runs from, whatever the working directory; then the working directory's", () => {
    // A node started from another directory (its configuration's) reported `unknown`.
    assert.equal(resolveBuildInfo(config(), dir, repo).commit, head);
    assert.equal(resolveBuildInfo(config(), repo, dir).commit, head, 'Sluice installed outside any checkout');
    assert.equal(resolveBuildInfo(config(), dir, dir).commit, 'unknown');
    assert.equal(resolveBuildInfo(config('build-42'), dir, repo).commit, 'build-42', 'app.commit first');
    const root = join(import.meta.dirname, '..', '..');
    assert.equal(
      resolveBuildInfo(config(), dir).commit,
      gitHead(root) ?? 'unknown',
      'by default, this checkout',
    );
  });
});
