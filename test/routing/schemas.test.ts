import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { TObject, TSchema } from '@sinclair/typebox';
import {
  FLOW_LIMITS,
  FlowCreateBody,
  FlowListBody,
  FlowUpdateBody,
  IdBody,
  StreamCreateBody,
  StreamListBody,
  StreamUpdateBody,
} from '../../src/routing/index.ts';

const DOC = readFileSync(new URL('../../docs/routing.md', import.meta.url), 'utf8');

const BODIES: Record<string, TObject> = {
  '/acp/traffic-flows/list': FlowListBody,
  '/acp/traffic-flows/create': FlowCreateBody,
  '/acp/traffic-flows/update': FlowUpdateBody,
  '/acp/traffic-flows/delete': IdBody,
  '/acp/streams/list': StreamListBody,
  '/acp/streams/create': StreamCreateBody,
  '/acp/streams/update': StreamUpdateBody,
  '/acp/streams/delete': IdBody,
};

/** The keys of a documented body (`{a, b?, c?: {…}, d? (1–500)}`), top level only, `?` kept: optional. */
function documentedKeys(body: string): string[] {
  const inner = body.trim().replace(/^\{/, '').replace(/\}$/, '');
  const keys: string[] = [];
  let depth = 0;
  let part = '';
  for (const ch of `${inner},`) {
    if ('{[('.includes(ch)) depth++;
    else if ('}])'.includes(ch)) depth--;
    if (ch === ',' && depth === 0) {
      keys.push(part.trim().split(/[:\s(]/)[0]!);
      part = '';
    } else {
      part += ch;
    }
  }
  return keys;
}

/** The schema's keys in the doc's notation: `name` when required, `name?` when optional. */
function schemaKeys(schema: TObject): string[] {
  const required = new Set(schema.required ?? []);
  return Object.keys(schema.properties).map((k) => (required.has(k) ? k : `${k}?`));
}

test("docs/routing.md's ACP table lists each body's fields as the schemas take them", () => {
  // The table had fallen behind: flow create without bot_action, timezone, forward_query,
  // cost_per_click or currency, stream create without redirect_mode or daily_cap.
  for (const [path, schema] of Object.entries(BODIES)) {
    const row = DOC.split('\n').find((l) => l.startsWith(`| \`${path}\` |`));
    assert.ok(row, `a row for ${path}`);
    const body = /^\| `[^`]+` \| \w+ \| `([^`]+)` \|/.exec(row)?.[1];
    assert.ok(body, `${path}: body column`);
    assert.deepEqual(documentedKeys(body.replaceAll('\\|', '|')).sort(), schemaKeys(schema).sort(), path);
  }
});

test("the documented stream filters are the schema's", () => {
  const row = DOC.split('\n').find((l) => l.startsWith('| `/acp/streams/create` |'))!;
  const filters = /filters\?: (\{.*?\]\})/.exec(row)?.[1];
  assert.ok(filters, 'filters spelled out on stream create');
  const schema = StreamCreateBody.properties.filters as TSchema as TObject;
  assert.deepEqual(documentedKeys(filters).sort(), schemaKeys(schema).sort());
});

test("the defaults docs/routing.md gives a create are the schemas'", () => {
  const para = DOC.slice(DOC.indexOf('A\ncreate leaves out'), DOC.indexOf('An update changes only'));
  const said = (s: string) => para.replace(/\s+/g, ' ').includes(s);
  for (const [what, schema] of [
    ['flow', FlowCreateBody],
    ['stream', StreamCreateBody],
  ] as const) {
    for (const [key, prop] of Object.entries(schema.properties)) {
      const d = (prop as TSchema).default as unknown;
      if (d === undefined) continue;
      const shown = typeof d === 'object' ? JSON.stringify(d) : String(d);
      assert.ok(said(`\`${key}: ${shown}\``), `${what} ${key}: ${shown}`);
    }
  }
});

test("docs/routing.md's table of limits gives each of FLOW_LIMITS", () => {
  const rows: Record<keyof typeof FLOW_LIMITS, string> = {
    streamsPerFlow: '| streams in a flow',
    rulesPerStream: "| rules in a stream's",
    valuesPerRule: '| values in one rule',
    ruleValuesPerFlow: '| rule values across every stream',
    valueLength: '| characters of a rule value',
    countriesPerList: '| codes in `countries_include`',
    targetUrlLength: '| characters of a `target_url`',
  };
  for (const [key, start] of Object.entries(rows)) {
    const row = DOC.split('\n').find((l) => l.startsWith(start));
    assert.ok(row, `a row for ${key}`);
    const limit = FLOW_LIMITS[key as keyof typeof FLOW_LIMITS].toLocaleString('en-US');
    assert.match(row, new RegExp(`\\| ${limit}( each)? \\|`), key);
  }
});
