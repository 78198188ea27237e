import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';

/**
 * The house rules of the layout (the folders are listed in README.md, "Where things are"): a
 * folder's `index.ts` is its face — named re-exports only, each one imported by another folder, a
 * test or a benchmark — no folder reaches past another's face, and no module imports itself back
 * through a circle.
 */
const ROOT = resolve(import.meta.dirname, '..');
const walk = (d: string): string[] =>
  readdirSync(d).flatMap((n) => {
    const p = join(d, n);
    if (statSync(p).isDirectory()) return n === 'static' ? [] : walk(p);
    return p.endsWith('.ts') ? [p] : [];
  });
const SOURCES = walk(join(ROOT, 'src'));
const USERS = [...SOURCES, ...['test', 'bench', 'soak'].flatMap((d) => walk(join(ROOT, d)))];
const text = new Map(USERS.map((f) => [f, readFileSync(f, 'utf8')]));

/** `src/<folder>` of a source file (`src` for the root files), or the top folder of a test or benchmark. */
function folderOf(file: string): string {
  const parts = relative(ROOT, file).split(sep);
  return parts[0] === 'src' && parts.length > 2 ? `src/${parts[1]}` : (parts[0] ?? '');
}

interface Reference {
  target: string;
  names: string[];
}

/** Static imports and re-exports with a relative path, and `await import()` destructured. */
function references(file: string): Reference[] {
  const out: Reference[] = [];
  const src = text.get(file) ?? '';
  for (const m of src.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?([\s\S]*?)\s+from\s+'([^']+)'/g)) {
    if (!m[2]?.startsWith('.')) continue; // a package: not ours
    const list = /\{([^}]*)\}/.exec(m[1] ?? '')?.[1] ?? '';
    out.push({ target: resolve(dirname(file), m[2] ?? ''), names: namesOf(list) });
  }
  for (const m of src.matchAll(/const\s*\{([^}]*)\}\s*=\s*await\s+import\('([^']+)'\)/g)) {
    if (!m[2]?.startsWith('.')) continue;
    out.push({
      target: resolve(dirname(file), m[2] ?? ''),
      names: namesOf((m[1] ?? '').replaceAll(':', ' as ')),
    });
  }
  return out;
}

function namesOf(list: string): string[] {
  return list
    .split(',')
    .map(
      (n) =>
        n
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)[0] ?? '',
    )
    .filter((n) => n !== '');
}

const faces = SOURCES.filter((f) => f.endsWith(`${sep}index.ts`));

test('every face holds named re-exports only', () => {
  for (const face of faces) {
    const src = text.get(face) ?? '';
    assert.doesNotMatch(src, /export\s+\*/, `${relative(ROOT, face)}: no export *`);
    const rest = src.replace(/export\s+(type\s+)?\{[^}]*\}\s+from\s+'[^']+';/g, '').trim();
    assert.equal(rest, '', `${relative(ROOT, face)} holds no code`);
  }
});

test('every name a face exports is imported outside its folder', () => {
  const used = new Set<string>();
  for (const file of USERS) {
    for (const r of references(file)) {
      if (r.target.endsWith(`${sep}index.ts`) && folderOf(r.target) !== folderOf(file)) {
        for (const n of r.names) used.add(`${r.target}:${n}`);
      }
    }
  }
  for (const face of faces) {
    for (const m of (text.get(face) ?? '').matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) {
      for (const n of namesOf(m[1] ?? '')) {
        assert.ok(
          used.has(`${face}:${n}`),
          `${relative(ROOT, face)} exports ${n}, which no other folder imports`,
        );
      }
    }
  }
});

test('no source file reaches past another folder’s face', () => {
  for (const file of SOURCES) {
    for (const r of references(file)) {
      const other = folderOf(r.target);
      if (other !== folderOf(file) && other !== 'src') {
        assert.ok(
          r.target.endsWith(`${sep}index.ts`),
          `${relative(ROOT, file)} imports ${relative(ROOT, r.target)}`,
        );
      }
    }
  }
});

test('no import circle between source files or between folders', () => {
  const edges = new Map(SOURCES.map((f) => [f, references(f).map((r) => r.target)]));
  const folderEdges = new Map<string, Set<string>>();
  for (const [f, targets] of edges) {
    for (const t of targets) {
      if (folderOf(t) !== folderOf(f))
        folderEdges.set(folderOf(f), (folderEdges.get(folderOf(f)) ?? new Set()).add(folderOf(t)));
    }
  }
  for (const [name, graph] of [
    ['file', edges],
    ['folder', new Map([...folderEdges].map(([k, v]) => [k, [...v]]))],
  ] as const) {
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (node: string): void => {
      if (state.get(node) === 'done') return;
      if (state.get(node) === 'open') {
        const circle = path.slice(path.indexOf(node)).concat(node);
        assert.fail(`${name} circle: ${circle.map((p) => relative(ROOT, p) || p).join(' -> ')}`);
      }
      state.set(node, 'open');
      path.push(node);
      for (const next of graph.get(node) ?? []) visit(next);
      path.pop();
      state.set(node, 'done');
    };
    for (const node of graph.keys()) visit(node);
  }
});
