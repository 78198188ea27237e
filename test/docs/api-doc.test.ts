import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { TSchema } from '@sinclair/typebox';
import { startTestNode, type TestNode } from '../helpers/node.ts';

// docs/api.md against the routes a node really serves: a route added, removed or renamed, a
// role changed or an ACP body field added without the reference following fails here.
const DOC = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');

/** Every route fastify serves, `path → methods`, read from its route tree. */
function servedRoutes(tree: string): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = line.match(/^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([^)]+)\))?$/);
    if (!m) continue;
    const depth = [...m[1]!].length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    if (m[3] !== undefined) routes.set(stack.join(''), m[3].split(', ').sort());
  }
  return routes;
}

/** The rows of the doc's "Routes" table: `path → {methods, role}`. */
function documentedRoutes(): Map<string, { methods: string[]; role: string }> {
  const table = DOC.slice(
    DOC.indexOf('\n## Routes\n'),
    DOC.indexOf('\n## ', DOC.indexOf('\n## Routes\n') + 1),
  );
  const rows = new Map<string, { methods: string[]; role: string }>();
  for (const m of table.matchAll(/^\| ((?:`[A-Z]+`(?:, )?)+) \| `([^`]+)` \| (\w+)/gm)) {
    rows.set(m[2]!, { methods: [...m[1]!.matchAll(/`([A-Z]+)`/g)].map((x) => x[1]!).sort(), role: m[3]! });
  }
  return rows;
}

/** The field names of the body table under `### \`POST path\``. */
function documentedFields(path: string): string[] {
  const head = `### \`POST ${path}\`\n`;
  const at = DOC.indexOf(head);
  assert.ok(at >= 0, `docs/api.md has a section ${head.trim()}`);
  const end = DOC.slice(at + head.length).search(/\n#{2,3} /);
  const section = DOC.slice(at, end < 0 ? undefined : at + head.length + end);
  return [...section.matchAll(/^\| `([a-z_0-9.]+)` \|/gm)].map((m) => m[1]!);
}

/** The fields a body schema takes: top-level names, and `a.b` for the fields of an object field. */
function schemaFields(body: TSchema): string[] {
  const out: string[] = [];
  for (const [name, s] of Object.entries((body.properties ?? {}) as Record<string, TSchema>)) {
    out.push(name);
    if (s.type === 'object' && s.properties)
      for (const inner of Object.keys(s.properties)) out.push(`${name}.${inner}`);
  }
  return out;
}

/** GitHub's anchor for a heading. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

describe('docs/api.md, against the routes a node serves', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({ yaml: 'observability:\n  metrics:\n    prometheus_enabled: true\n' });
  });
  after(() => t.close());

  test('the Routes table lists every served route with its methods, and nothing else', () => {
    const served = servedRoutes(t.node.app.printRoutes({ commonPrefix: false }));
    assert.ok(served.has('/go/:slug') && served.has('/acp/system/metrics'), 'the route tree was read');
    const documented = new Map([...documentedRoutes()].map(([path, row]) => [path, row.methods]));
    assert.deepEqual(Object.fromEntries(documented), Object.fromEntries(served));
  });

  test('every ACP route is documented with its role', () => {
    const documented = documentedRoutes();
    for (const route of t.node.acp.routes)
      assert.equal(documented.get(route.path)?.role, route.role, route.path);
  });

  test("each ACP route's section lists its body's fields, as its schema has them", () => {
    for (const route of t.node.acp.routes) {
      assert.deepEqual(documentedFields(route.path), schemaFields(route.body), route.path);
    }
  });

  test("the doc's links to its own sections land on a heading", () => {
    const anchors = new Set([...DOC.matchAll(/^#{1,3} (.+)$/gm)].map((m) => slug(m[1]!)));
    const broken = [...DOC.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!).filter((a) => !anchors.has(a));
    assert.deepEqual(broken, []);
  });
});

test('links from the other docs into docs/api.md land on a heading', () => {
  const anchors = new Set([...DOC.matchAll(/^#{1,3} (.+)$/gm)].map((m) => slug(m[1]!)));
  const docs = [
    'README.md',
    ...['clicks', 'routing', 'reports', 'errors', 'console', 'audit', 'cron', 'telemetry'].map(
      (n) => `docs/${n}.md`,
    ),
  ];
  const broken: string[] = [];
  for (const file of docs) {
    const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
    for (const m of text.matchAll(/api\.md#([a-z0-9_-]+)/g))
      if (!anchors.has(m[1]!)) broken.push(`${file}: #${m[1]}`);
  }
  assert.deepEqual(broken, []);
});
