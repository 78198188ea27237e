import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { TSchema } from '@sinclair/typebox';
import { ConfigSchema, DEFAULT_TASKS } from '../../src/config/index.ts';

const DOC = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** Every configuration key of the schema, in the doc's notation (`a.b`, `list[].field`, `map.<name>.field`). */
function keys(s: TSchema, path: string, out: string[]): string[] {
  if (s.type === 'object' && s.properties) {
    if (path && !path.endsWith('[]')) out.push(path);
    for (const [k, v] of Object.entries(s.properties)) keys(v as TSchema, path ? `${path}.${k}` : k, out);
  } else if (s.type === 'object' && s.patternProperties) {
    out.push(path);
    const value = Object.values(s.patternProperties)[0] as TSchema;
    if (value.type === 'object' && value.properties) keys(value, `${path}.<name>`, out);
  } else if (s.type === 'array' && (s.items as TSchema | undefined)?.type === 'object') {
    out.push(path);
    keys(s.items as TSchema, `${path}[]`, out);
  } else {
    out.push(path);
  }
  return out;
}

const leaves = (s: TSchema) => {
  const all = keys(s, '', []);
  // Sections (mappings that only group keys) need no row of their own.
  return all.filter((k) => !all.some((other) => other.startsWith(`${k}.`)) || /\[\]$|\.tasks$/.test(k));
};

test('docs/configuration.md has a row for every configuration key', () => {
  const missing = leaves(ConfigSchema).filter((k) => !DOC.includes(`| \`${k}\` |`));
  assert.deepEqual(missing, []);
});

test('every key documented in the table exists in the schema', () => {
  const known = new Set(keys(ConfigSchema, '', []));
  const table = DOC.slice(DOC.indexOf('## Keys'), DOC.indexOf('### Built-in tasks'));
  const documented = [...table.matchAll(/^\| `([a-z_.<>[\]]+)` \|/gm)].map((m) => m[1]!);
  assert.ok(documented.length > 40);
  assert.deepEqual(
    documented.filter((k) => !known.has(k)),
    [],
  );
});

test('documented defaults match the schema', () => {
  const row = (key: string) =>
    DOC.split('\n')
      .find((l) => l.startsWith(`| \`${key}\` |`))
      ?.split('|')[2]
      ?.trim();
  assert.equal(row('app.server.port'), '`8080`');
  assert.equal(row('cache.ttl_ms'), '`60000`');
  const props = ConfigSchema.properties;
  assert.equal(props.app.properties.server.properties.port.default, 8080);
  assert.equal(props.cache.properties.ttl_ms.default, 60000);
  assert.equal(
    row('observability.metrics.http_buckets_ms'),
    `\`[${props.observability.properties.metrics.properties.http_buckets_ms.default.join(', ')}]\``,
  );
  for (const [key, schema] of Object.entries(props.clicks.properties)) {
    const documented = 'default' in schema ? `\`${schema.default}\`` : '—';
    assert.equal(row(`clicks.${key}`), documented, `clicks.${key}`);
  }
  assert.equal(
    row('observability.metrics.prefix'),
    `\`${props.observability.properties.metrics.properties.prefix.default}\``,
  );
});

test('the built-in tasks table names every built-in task with its kind, schedule and timeout', () => {
  const table = DOC.slice(DOC.indexOf('### Built-in tasks'), DOC.indexOf('## Runtime keys'));
  const rows = new Map(
    [...table.matchAll(/^\| `([a-z_]+)` \| `([a-z.]+)` \| `([^`]+)`[^|]*\| \w+ \| (\d+) \|/gm)].map((m) => [
      m[1]!,
      [m[2], m[3], Number(m[4])],
    ]),
  );
  assert.deepEqual([...rows.keys()].sort(), Object.keys(DEFAULT_TASKS).sort());
  for (const [name, task] of Object.entries(DEFAULT_TASKS))
    assert.deepEqual(rows.get(name), [task.kind, task.schedule, task.timeout_ms], name);
});
