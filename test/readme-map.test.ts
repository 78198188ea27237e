import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

// The README's "Where things are" map names everything directly under src/, read from disk: a
// folder added (src/procedures/, say) without its line fails here, and only the line is needed.
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

test('the README map has a line for every folder and file directly under src/', () => {
  const at = README.indexOf('## Where things are');
  assert.ok(at >= 0, 'README has "Where things are"');
  const map = README.slice(at, README.indexOf('\n## ', at + 1));
  const entries = readdirSync(new URL('../src/', import.meta.url), { withFileTypes: true }).map((e) =>
    e.isDirectory() ? `src/${e.name}/` : `src/${e.name}`,
  );
  const missing = entries.filter((name) => !new RegExp(`^${name.replace(/[.]/g, '\\.')}\\s`, 'm').test(map));
  assert.deepEqual(missing, []);
});
