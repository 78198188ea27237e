import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { runCli, spawnCli, startCli } from './helpers/cli.ts';
import { until } from './helpers/until.ts';

describe('sluice CLI', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'));
    writeFileSync(
      join(dir, 'config.test.yml'),
      `storage:\n  sqlite:\n    path: ${join(dir, 'cli.db')}\napp:\n  server:\n    port: 0\n`,
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('configuration errors stop the start with exit 78 and one message', () => {
    const cases: [string, string, RegExp][] = [
      [
        'an unknown key',
        'app:\n  server:\n    prot: 80\n',
        /app\.server\.prot in .*config\.bad\.yml: unknown key/,
      ],
      [
        'a wrong type',
        'app:\n  server:\n    port: eighty\n',
        /app\.server\.port in .*config\.bad\.yml: expected an integer from 0 to 65535, got "eighty"/,
      ],
      [
        'an out-of-range value',
        'cache:\n  max_entries: 0\n',
        /cache\.max_entries in .*config\.bad\.yml: expected an integer from 1 to/,
      ],
      ['invalid YAML', 'app: [\n', /config\.bad\.yml: invalid YAML/],
      [
        'a country database that cannot be read',
        'routing:\n  geoip_path: /nonexistent/countries.mmdb\n',
        /^routing\.geoip_path: cannot open \/nonexistent\/countries\.mmdb as a country database: .*ENOENT/,
      ],
    ];
    for (const [what, yaml, message] of cases) {
      test(what, async () => {
        writeFileSync(join(dir, 'config.bad.yml'), yaml);
        const r = await runCli(['start', '--config-dir', dir, '--mode', 'bad'], { cwd: dir });
        assert.equal(r.code, 78, r.stderr);
        assert.match(r.stderr, message);
        assert.equal(r.stderr.trim().split('\n').length, 1, 'one message');
      });
    }
    test('a missing mode file', async () => {
      const r = await runCli(['start', '--config-dir', dir, '--mode', 'nosuch'], { cwd: dir });
      assert.equal(r.code, 78);
      assert.match(r.stderr, /config\.nosuch\.yml: the file does not exist/);
    });
    test('an environment override names its variable', async () => {
      const r = await runCli(['start', '--config-dir', dir, '--mode', 'test'], {
        cwd: dir,
        env: { APP__APP__SERVER__PORT: '-1' },
      });
      assert.equal(r.code, 78);
      assert.match(
        r.stderr,
        /app\.server\.port in environment variable APP__APP__SERVER__PORT: expected an integer/,
      );
    });
    test('APP_CONFIG_DIR and APP_MODE are honoured', async () => {
      writeFileSync(join(dir, 'config.envmode.yml'), 'nope: 1\n');
      const r = await runCli(['start'], { cwd: dir, env: { APP_CONFIG_DIR: dir, APP_MODE: 'envmode' } });
      assert.equal(r.code, 78);
      assert.match(r.stderr, /nope in .*config\.envmode\.yml: unknown key/);
    });
  });

  test('bad usage exits 64', async () => {
    assert.equal((await runCli(['frobnicate'], { cwd: dir })).code, 64);
    assert.equal(
      (
        await runCli(
          ['operator', 'create', '--name', 'x', '--role', 'king', '--config-dir', dir, '--mode', 'test'],
          { cwd: dir },
        )
      ).code,
      64,
    );
    assert.equal((await runCli(['start', '--bogus'], { cwd: dir })).code, 64);
    // A token where the URL was expected (flags swapped) is not printed back whole.
    const token = `slc_${'A1b2_C3d4-'.repeat(4)}`;
    const swapped = await runCli(['doctor', '--url', token, '--token', 'http://127.0.0.1:1'], { cwd: dir });
    assert.equal(swapped.code, 64);
    assert.match(swapped.stderr, /not an http\(s\) URL: slc_…/);
    assert.ok(!swapped.stderr.includes(token), swapped.stderr);
  });

  test('the command package.json names as its bin runs by itself, as `npx sluice` runs it', async () => {
    // A checkout whose src/cli.ts had lost its executable bit answered every `npx sluice ...` of
    // the README with "Permission denied" (npm start, which runs it through node, still worked).
    const root = resolve(import.meta.dirname, '..');
    const bin = resolve(root, JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).bin.sluice);
    assert.ok(statSync(bin).mode & 0o100, `${bin} is executable`);
    // Its shebang (`#!/usr/bin/env node`) finds node on PATH: the project's Node 24 goes first, as
    // npm's scripts and `npx` put it, so a shell whose first node is older runs this test as well.
    const PATH = [dirname(process.execPath), process.env.PATH].filter(Boolean).join(delimiter);
    const { stdout } = await promisify(execFile)(bin, ['help'], { env: { PATH } });
    assert.match(stdout, /^Usage: sluice <command>/);
  });

  test('--help after a command prints the usage and exits 0 without starting a node', async () => {
    // `sluice start --help` used to start a node (and `migrate --help` to migrate): help must do
    // nothing else, so the database the configuration names is never created.
    const quiet = mkdtempSync(join(tmpdir(), 'sluice-cli-help-'));
    try {
      writeFileSync(
        join(quiet, 'config.test.yml'),
        `storage:\n  sqlite:\n    path: ${join(quiet, 'help.db')}\napp:\n  server:\n    port: 0\n`,
      );
      const conf = ['--config-dir', quiet, '--mode', 'test'];
      const asks = [
        ['--help'],
        ['-h'],
        ['help'],
        ['start', '--help'],
        ['start', ...conf, '-h'],
        ['migrate', '--help', ...conf],
        ['demo', '-h', ...conf],
        ['operator', '--help'],
        ['operator', 'create', '--help', ...conf],
        ['operator', 'list', '-h', ...conf],
        ['doctor', '--help'],
      ];
      // Killed if still running by then: a node that started instead fails here, not by a hang.
      const runs = await Promise.all(asks.map((args) => runCli(args, { cwd: quiet, killAfterMs: 60_000 })));
      runs.forEach((r, i) => {
        const what = asks[i]!.join(' ');
        assert.equal(r.code, 0, `${what}: ${r.stderr}`);
        assert.match(r.stdout, /^Usage: sluice <command> \[options\]/, what);
        assert.equal(r.stderr, '', what);
      });
      assert.ok(!existsSync(join(quiet, 'help.db')), 'no command opened the database');
    } finally {
      rmSync(quiet, { recursive: true, force: true });
    }
  });

  test('the README documents every command and option of the usage', async () => {
    const usage = (await runCli(['help'], { cwd: dir })).stdout;
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## The command line'), readme.indexOf('## Several nodes'));
    const commands = [...usage.matchAll(/^ {2}([a-z]+(?: (?:create|list|revoke))?)\b/gm)].map((m) => m[1]!);
    assert.ok(commands.length >= 7, commands.join());
    const options = new Set([...usage.matchAll(/(?<![\w-])--?[a-z][a-z0-9-]*/g)].map((m) => m[0]));
    assert.ok(options.has('--config-dir') && options.has('-h'), [...options].join());
    assert.deepEqual(
      commands.filter((c) => !section.includes(`sluice ${c}`)),
      [],
      'commands missing from the README',
    );
    assert.deepEqual(
      [...options].filter((o) => !new RegExp(`(?<![\\w-])${o}(?![\\w-])`).test(section)),
      [],
      'options missing from the README',
    );
  });

  test('operator create prints a token once; list shows no token; revoke', async () => {
    const args = ['--config-dir', dir, '--mode', 'test'];
    const created = await runCli(['operator', 'create', '--name', 'alice', '--role', 'operator', ...args], {
      cwd: dir,
    });
    assert.equal(created.code, 0, created.stderr);
    const token = /slc_[A-Za-z0-9_-]{43}/.exec(created.stdout)?.[0];
    assert.ok(token);
    const dup = await runCli(['operator', 'create', '--name', 'alice', '--role', 'viewer', ...args], {
      cwd: dir,
    });
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /already exists/);
    const listed = await runCli(['operator', 'list', '--json', ...args], { cwd: dir });
    assert.equal(listed.code, 0);
    assert.ok(!listed.stdout.includes(token));
    const ops = JSON.parse(listed.stdout) as { name: string; role: string; revoked_at: string | null }[];
    assert.deepEqual(
      ops.map((o) => [o.name, o.role, o.revoked_at]),
      [['alice', 'operator', null]],
    );
    assert.equal((await runCli(['operator', 'revoke', '--name', 'alice', ...args], { cwd: dir })).code, 0);
    assert.equal((await runCli(['operator', 'revoke', '--name', 'alice', ...args], { cwd: dir })).code, 1);
    const after = JSON.parse(
      (await runCli(['operator', 'list', '--json', ...args], { cwd: dir })).stdout,
    ) as {
      revoked_at: string | null;
    }[];
    assert.ok(after[0]?.revoked_at);
  });

  test('migrate applies migrations; demo creates its flows once', async () => {
    const args = ['--config-dir', dir, '--mode', 'test'];
    const migrated = await runCli(['migrate', ...args], { cwd: dir });
    assert.equal(migrated.code, 0, migrated.stderr);
    const first = await runCli(['demo', ...args], { cwd: dir });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /Created demo flows: demo, demo-position/);
    // The follow-up it suggests is a browser's click (curl's own user agent is a bot's, never
    // counted as a click), at the configured address (port 0 here: any free port).
    const ua = first.stdout.match(/curl -si -A '([^']+)' .*http:\/\/127\.0\.0\.1:<port>\/go\/demo/)?.[1];
    assert.ok(ua, first.stdout);
    const { parseUserAgent } = await import('../src/clicks/index.ts');
    assert.equal(parseUserAgent(ua, 'secret').is_bot, false, ua);
    const second = await runCli(['demo', ...args], { cwd: dir });
    assert.match(second.stdout, /already exist/);
    const { openSqlite } = await import('../src/storage/index.ts');
    const { systemClock } = await import('../src/time/index.ts');
    const store = openSqlite(join(dir, 'cli.db'), systemClock);
    try {
      const demo = await store.flows.getBySlug('demo');
      assert.ok(demo);
      assert.equal((await store.streams.ofFlow(demo.id)).length, 4);
    } finally {
      await store.close();
    }
  });

  test('start serves, and SIGTERM stops it gracefully with exit 0', async () => {
    const node = await startCli(['--config-dir', dir, '--mode', 'test'], { cwd: dir });
    const res = await fetch(`${node.url}/healthz`);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    node.child.kill('SIGTERM');
    assert.equal(await node.exited, 0);
    assert.match(node.stdout(), /"message":"sluice stopped"/);
  });

  describe('a PostgreSQL that cannot be reached', () => {
    let pgDir: string;
    let port: number;
    before(async () => {
      // A port nothing listens on (a privileged one: a port just freed could be picked again by
      // any server asking for port 0): each connection is refused, as a database not yet up refuses.
      port = 1;
      pgDir = mkdtempSync(join(tmpdir(), 'sluice-cli-pg-'));
      const config = (wait: string) =>
        `app:\n  server:\n    host: 127.0.0.1\n    port: 0\nstorage:\n  driver: postgres\n  postgres:\n    url: postgres://sluice@127.0.0.1:${port}/sluice\n${wait}`;
      writeFileSync(join(pgDir, 'config.nowait.yml'), config('    start_wait_ms: 0\n'));
      writeFileSync(join(pgDir, 'config.wait.yml'), config(''));
    });
    after(() => rmSync(pgDir, { recursive: true, force: true }));

    test('start and migrate say which address refused, in one line, and exit 1', async () => {
      const refused = new RegExp(
        `^sluice: the database could not be reached: .*ECONNREFUSED 127\\.0\\.0\\.1:${port}`,
      );
      for (const command of ['start', 'migrate']) {
        const run = await runCli([command, '--config-dir', pgDir, '--mode', 'nowait'], {
          cwd: pgDir,
          killAfterMs: 60_000,
        });
        assert.equal(run.code, 1, command);
        assert.match(run.stderr, refused, command);
        assert.doesNotMatch(run.stderr, /\n\s+at /, `${command}: no stack trace`);
        if (command === 'start') {
          const failed = run.stdout
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as { message: string; err?: string })
            .find((r) => r.message === 'sluice could not start');
          assert.match(failed?.err ?? '', /ECONNREFUSED/, 'one log record says why');
        }
      }
    });

    test('start waits for it, and a SIGTERM meanwhile stops it with exit 0', async () => {
      const { child, stdout, stderr, exited } = spawnCli(['start', '--config-dir', pgDir, '--mode', 'wait'], {
        cwd: pgDir,
      });
      try {
        await until(
          'a refusal logged while waiting',
          () => stdout().includes('database unreachable at start; trying again'),
          60_000,
        );
        assert.match(stdout(), /ECONNREFUSED/);
        child.kill('SIGTERM');
        assert.equal(await exited, 0, stderr());
        assert.match(stderr(), /^sluice: stopped while waiting for the database/);
        // A stop asked for is no failure: no error record for an alert to fire on.
        assert.doesNotMatch(stdout(), /"level":"error"/);
        assert.match(stdout(), /"message":"sluice start abandoned: stopped"/);
      } finally {
        child.kill('SIGKILL');
      }
    });
  });

  test('every stdout line of sluice start is a JSON record, but for the one-time bootstrap token', async () => {
    // Development mode with no operator: the node creates "admin" and prints its token once, on
    // purpose outside the log (a token never goes into a log line); everything else is JSON.
    const dev = mkdtempSync(join(tmpdir(), 'sluice-cli-dev-'));
    try {
      writeFileSync(
        join(dev, 'config.development.yml'),
        `app:\n  server:\n    host: 127.0.0.1\n    port: 0\nstorage:\n  sqlite:\n    path: ${join(dev, 'dev.db')}\nobservability:\n  logging:\n    level: debug\n`,
      );
      const node = await startCli(['--config-dir', dev, '--mode', 'development'], { cwd: dev });
      const res = await fetch(`${node.url}/nope`);
      assert.equal(res.status, 404);
      await res.arrayBuffer();
      node.child.kill('SIGTERM');
      assert.equal(await node.exited, 0);
      const bootstrap =
        /Created ACP operator "admin" \(role admin\)\. Its token, shown only this once:\n\n {4}slc_[A-Za-z0-9_-]{43}\n\n/g;
      assert.equal(
        node.stderr().match(bootstrap)?.length,
        1,
        'the bootstrap token is printed once, on stderr',
      );
      const postbackKey =
        /Created the postback key\. .*shown only this once.*\n\n {4}pbk_[A-Za-z0-9_-]{43}\n\n/g;
      assert.equal(node.stderr().match(postbackKey)?.length, 1, 'so is the postback key');
      const out = node.stdout();
      assert.doesNotMatch(out, /slc_/, 'and never on stdout, the log stream');
      assert.doesNotMatch(out, /pbk_/, 'nor the postback key');
      const lines = out.split('\n');
      assert.equal(lines.pop(), '', 'stdout ends with a whole line');
      for (const line of lines) {
        assert.doesNotThrow(() => JSON.parse(line), `not a JSON record: ${JSON.stringify(line)}`);
      }
      const messages = lines.map((l) => (JSON.parse(l) as { message?: string }).message);
      for (const m of ['sluice started', 'api error', 'sluice stopped']) assert.ok(messages.includes(m), m);
    } finally {
      rmSync(dev, { recursive: true, force: true });
    }
  });
});
