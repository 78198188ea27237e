import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError, describeCause, hasCode } from '../../src/errors/index.ts';

describe('hasCode', () => {
  test('is true only for an ApiError of that code', () => {
    const err = new ApiError('db.unavailable');
    assert.equal(hasCode(err, 'db.unavailable'), true);
    assert.equal(hasCode(err, 'resource.conflict'), false);
  });

  test('an error of another class carrying the same code string is not one', () => {
    const lookalike = Object.assign(new Error('x'), { code: 'db.unavailable' });
    assert.equal(hasCode(lookalike, 'db.unavailable'), false);
    assert.equal(hasCode(undefined, 'db.unavailable'), false);
  });
});

describe('describeCause', () => {
  test('names each error of the chain with its code', () => {
    const root = Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
    const err = new ApiError('db.unavailable', 'database unreachable', { cause: root });
    assert.equal(
      describeCause(err),
      'ApiError [db.unavailable]: database unreachable <- caused by: Error [ECONNREFUSED]: refused',
    );
  });
});
