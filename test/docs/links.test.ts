import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The links between the README and docs/*.md, anchors included, land: a heading renamed (or a
// reference rewritten, as docs/PERFORMANCE.md was) breaks the test, not a reader's link.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FILES = [
  'README.md',
  'CHANGELOG.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(join(ROOT, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]!.trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a id="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

test('every link between the README and the docs names a file and a heading that exist', () => {
  const broken: string[] = [];
  for (const file of FILES) {
    const text = readFileSync(join(ROOT, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const to = path === '' ? file : relative(ROOT, join(ROOT, dirname(file), path));
      if (!existsSync(join(ROOT, to))) {
        broken.push(`${file}: ${target} (no file)`);
        continue;
      }
      if (anchor !== undefined && to.endsWith('.md') && !anchorsOf(to).has(anchor)) {
        broken.push(`${file}: ${target}`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test('the docs stand alone: no `§N` of a contract their readers do not have', () => {
  const cited = FILES.flatMap((file) =>
    [...readFileSync(join(ROOT, file), 'utf8').matchAll(/^.*§\s?\d+.*$/gm)].map(
      (m) => `${file}: ${m[0].trim()}`,
    ),
  );
  assert.deepEqual(cited, []);
});

test("the docs run the project's Node: `npx node …`, never a bare `node` that may be older than 22", () => {
  const bare = FILES.flatMap((file) =>
    [
      ...readFileSync(join(ROOT, file), 'utf8').matchAll(
        /^.*(?<!npx )(?<![\w-])node (?:bench|soak|src|test|--).*$/gm,
      ),
    ].map((m) => `${file}: ${m[0].trim()}`),
  );
  assert.deepEqual(bare, []);
});

/** The sources a maintainer reads: TypeScript everywhere, and the console's browser modules. */
function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (/\.(?:ts|js|mjs)$/.test(entry.name)) out.push(path);
    }
  };
  for (const dir of ['src', 'test', 'bench', 'soak']) walk(dir);
  return out;
}

test('the sources stand alone too: no `§N` of the contract (an RFC section is fine)', () => {
  const section = new RegExp(`^.*${'\u00a7'}\\s?\\d.*$`, 'gm');
  const cited = sourceFiles().flatMap((file) =>
    [
      ...readFileSync(join(ROOT, file), 'utf8')
        .replace(/RFC \d+ \u00a7[\d.]+/g, 'RFC')
        .matchAll(section),
    ].map((m) => `${file}: ${m[0].trim()}`),
  );
  assert.deepEqual(cited, []);
});

test('every docs/<file>.md#anchor a source cites names a file and a heading that exist', () => {
  const broken: string[] = [];
  for (const file of sourceFiles()) {
    for (const m of readFileSync(join(ROOT, file), 'utf8').matchAll(/\bdocs\/([\w.-]+\.md)(?:#([\w-]+))?/g)) {
      const to = `docs/${m[1]!}`;
      if (!existsSync(join(ROOT, to))) broken.push(`${file}: ${m[0]} (no file)`);
      else if (m[2] !== undefined && !anchorsOf(to).has(m[2])) broken.push(`${file}: ${m[0]}`);
    }
  }
  assert.deepEqual(broken, []);
});
