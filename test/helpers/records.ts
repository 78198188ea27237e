import type { FlowRecord, StreamRecord } from '../../src/storage/index.ts';

/** A complete flow record for tests and benchmarks that compile flows without storage. */
export function flowRecord(over: Partial<FlowRecord> = {}): FlowRecord {
  return {
    id: 'f1',
    slug: 'promo',
    name: 'Promo',
    status: 'active',
    rotation: 'position',
    clicks: 0,
    no_match: 0,
    last_click_at: null,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}

let n = 0;
/** A complete stream record (unique id unless given). */
export function streamRecord(over: Partial<StreamRecord> = {}): StreamRecord {
  return {
    id: `s${++n}`,
    flow_id: 'f1',
    name: 'x',
    type: 'regular',
    position: 0,
    weight: 100,
    status: 'active',
    filters: {},
    target_url: 'https://example.com/',
    redirect_code: 302,
    hits: 0,
    last_hit_at: null,
    target_status: null,
    target_checked_at: null,
    target_error: null,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}
