import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ERROR_CODES } from '../../src/errors/index.ts';

const DOC = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
const rows = new Map([...DOC.matchAll(/^\| `([a-z_.]+)` \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])]));

test('the registry is pinned: no code renamed, removed or remapped without this test changing', () => {
  assert.deepEqual(Object.fromEntries(Object.entries(ERROR_CODES).map(([code, e]) => [code, e.status])), {
    'validation.invalid_input': 400,
    'auth.unauthorized': 401,
    'auth.forbidden': 403,
    'resource.not_found': 404,
    'request.method_not_allowed': 405,
    'resource.conflict': 409,
    'task.not_leader': 409,
    'task.already_running': 409,
    'request.too_large': 413,
    'request.unsupported_media_type': 415,
    'request.expectation_failed': 417,
    'request.headers_too_large': 431,
    'rate.limited': 429,
    'internal.error': 500,
    'db.unavailable': 503,
    'node.stopping': 503,
  });
});

test('docs/errors.md documents every code with its status, and nothing else', () => {
  for (const [code, e] of Object.entries(ERROR_CODES)) assert.equal(rows.get(code), e.status, code);
  assert.deepEqual(
    [...rows.keys()].filter((c) => !(c in ERROR_CODES)),
    [],
  );
});
