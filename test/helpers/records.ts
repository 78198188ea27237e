import type { ClickFacts } from '../../src/clicks/index.ts';
import type { MacroValues, Visitor } from '../../src/routing/index.ts';
import type { FlowInput, FlowRecord, NewClick, StreamInput, StreamRecord } from '../../src/storage/index.ts';

/** A complete flow record for tests and benchmarks that compile flows without storage. */
export function flowRecord(over: Partial<FlowRecord> = {}): FlowRecord {
  return {
    id: 'f1',
    slug: 'promo',
    name: 'Promo',
    status: 'active',
    rotation: 'position',
    forward_query: false,
    bot_action: 'route',
    timezone: 'UTC',
    cost_per_click: 0,
    currency: 'USD',
    clicks: 0,
    no_match: 0,
    bots: 0,
    uniques: 0,
    last_click_at: null,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...over,
  };
}

/** What `flows.create` takes: an active flow rotating by position, unless told otherwise. */
export const flowInput = (slug: string, over: Partial<FlowInput> = {}): FlowInput => ({
  slug,
  name: slug,
  status: 'active',
  rotation: 'position',
  ...over,
});

/** What `streams.create` takes: a regular stream of the flow to example.com, unless told otherwise. */
export const streamInput = (flow_id: string, over: Partial<StreamInput> = {}): StreamInput => ({
  flow_id,
  name: 's',
  type: 'regular',
  position: 0,
  weight: 100,
  status: 'active',
  filters: {},
  target_url: 'https://example.com/',
  redirect_code: 302,
  ...over,
});

let n = 0;
/** A complete stream record (unique id unless given). */
export function streamRecord(over: Partial<StreamRecord> = {}): StreamRecord {
  return {
    id: `s${++n}`,
    ...streamInput('f1', { name: 'x' }),
    redirect_mode: 'http',
    daily_cap: 0,
    hits: 0,
    uniques: 0,
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

/** A click as the hot path hands it to the click log (unique id unless given). */
export function newClick(over: Partial<NewClick> = {}): NewClick {
  return {
    click_id: `c${String(++n).padStart(8, '0')}`,
    flow_id: 'f1',
    stream_id: 's1',
    at: Date.UTC(2026, 0, 2, 12),
    outcome: 'redirect',
    country: 'DE',
    device_type: 'mobile',
    os: 'Android',
    browser: 'Chrome',
    language: 'de',
    referrer_host: 'news.example',
    subs: null,
    is_unique: true,
    is_bot: false,
    cost: 0.05,
    ip_prefix: '203.0.113.0/24',
    ...over,
  };
}

/** A described click (what `ClickDescriber.describe` returns), every optional fact absent. */
export function clickFacts(over: Partial<ClickFacts> = {}): ClickFacts {
  return {
    click_id: 'c1',
    device_type: 'other',
    os: null,
    browser: null,
    language: null,
    referrer_host: null,
    sub1: null,
    sub2: null,
    sub3: null,
    sub4: null,
    sub5: null,
    sub6: null,
    sub7: null,
    sub8: null,
    sub9: null,
    sub10: null,
    ip_prefix: null,
    is_unique: false,
    is_bot: false,
    ...over,
  };
}

/** What a target's macros are filled from, for tests that build targets without a request. */
export function macroValues(
  over: Partial<Omit<MacroValues, 'click'>> & { click?: Partial<ClickFacts> } = {},
): MacroValues {
  const { click, ...rest } = over;
  return { country: undefined, flow: 'f', request_id: 'r', query: {}, ...rest, click: clickFacts(click) };
}

/** A visitor for the routing decision: a country, every other fact absent unless given. */
export function visitor(
  country: string | undefined,
  over: Partial<Omit<Visitor, 'facts'>> & { facts?: Partial<ClickFacts> } = {},
): Visitor {
  const { facts, ...rest } = over;
  return {
    country,
    client: undefined,
    query: {},
    at: Date.UTC(2026, 0, 5, 12),
    ...rest,
    facts: clickFacts(facts),
  };
}
