/**
 * What a Sluice node under load holds and what it is asked: flows seeded through storage, and the
 * requests the load generator picks from at random (a slug, and a country header when the
 * scenario sends one). Shared by the server child (seeding) and the benchmarks (requests).
 */
import type { Storage } from '../../src/storage/index.ts';

export interface SluiceScenario {
  /** Flows to seed; slugs `bench` for one, `f0`…`f{n-1}` for more. */
  flows: number;
  /**
   * Streams in each flow (at least 2): one forced stream for JP, regular weighted streams with
   * country filters (include lists of 4 countries and exclude lists of 2, alternately), and a
   * default stream without filters, so every request is redirected.
   */
  streams: number;
  /** Macros in each target: none, `{stream}` only, or all four (`{country}` `{flow}` `{stream}` `{request_id}`). */
  macros: 'none' | 'stream' | 'all';
  /** Send `cf-ipcountry` (loopback is a trusted proxy by default), a random country per request. */
  country: boolean;
  /** Ask for this many slugs that have no flow instead (`nope-0`…): bots and stale links, 404s. */
  unknown?: number;
  /**
   * The node's storage: SQLite in a temp dir (the default), or a schema of its own on the
   * PostgreSQL at `SLUICE_TEST_PG_URL` (dropped when the server stops).
   */
  backend?: 'sqlite' | 'postgres';
  /**
   * A third of the requests carry `?sub1=` with one of this many values, drawn at random per
   * request (a campaign's sub-ids: what the click log's `clicks_sub1` index is keyed by).
   */
  subs?: number;
  /** More of the node's configuration, as YAML lines appended to its file (e.g. a postback key). */
  config?: string;
}

/**
 * What the load generator sends: a random path, a random header value when there are some, and a
 * user agent on every request when set.
 */
export interface RequestMix {
  paths: string[];
  header?: { name: string; values: string[] };
  /**
   * A browser's: a request without one is a bot (docs/routing.md#bots), which skips the uniqueness
   * check.
   */
  userAgent?: string;
  /** A third of the requests get `?sub1=c<n>`, n drawn from 1…this per request. */
  subs?: number;
}

/** A person's browser, so that every request is a click described in full (#14). */
export const BROWSER_UA =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Twenty countries, most of a real audience's traffic; the filters draw from the same list. */
export const COUNTRIES = [
  'US',
  'DE',
  'JP',
  'BR',
  'FR',
  'GB',
  'IN',
  'CA',
  'AU',
  'NL',
  'ES',
  'IT',
  'MX',
  'PL',
  'SE',
  'TR',
  'KR',
  'ID',
  'NG',
  'ZA',
];

/**
 * The benchmarks' Sluice scenarios, as [name, what, scenario]: the lightest, then one thing changed
 * at a time, then all of them together (`mixed`, the realistic one).
 */
export const NAMED_SCENARIOS: readonly [string, string, SluiceScenario][] = [
  [
    'light',
    '1 slug, 5 streams, {stream}, no country',
    { flows: 1, streams: 5, macros: 'stream', country: false },
  ],
  [
    'slugs-1000',
    '1,000 slugs at random, 5 streams',
    { flows: 1000, streams: 5, macros: 'stream', country: false },
  ],
  [
    'country',
    'light + cf-ipcountry (20 countries)',
    { flows: 1, streams: 5, macros: 'stream', country: true },
  ],
  ['macros', 'country + all 4 macros in targets', { flows: 1, streams: 5, macros: 'all', country: true }],
  ['streams-10', 'country, 10 streams', { flows: 1, streams: 10, macros: 'stream', country: true }],
  ['streams-100', 'country, 100 streams', { flows: 1, streams: 100, macros: 'stream', country: true }],
  [
    'mixed',
    '1,000 slugs × 10 streams, country, 4 macros',
    { flows: 1000, streams: 10, macros: 'all', country: true },
  ],
  [
    'unknown-1000',
    '1,000 slugs with no flow (404), country',
    { flows: 1, streams: 5, macros: 'stream', country: true, unknown: 1000 },
  ],
];
/**
 * The named scenarios a benchmark was asked for (all when `only` is undefined), each followed by
 * the same on PostgreSQL (`name (pg)`) when `postgres` is set.
 */
export function pickScenarios(
  only: readonly string[] | undefined,
  postgres: boolean,
  keep: (scenario: SluiceScenario) => boolean = () => true,
): [string, string, SluiceScenario][] {
  return NAMED_SCENARIOS.filter(
    ([name, , s]) => (only === undefined || only.includes(name)) && keep(s),
  ).flatMap(([name, what, scenario]): [string, string, SluiceScenario][] =>
    postgres
      ? [
          [name, what, scenario],
          [`${name} (pg)`, `${what}; PostgreSQL`, { ...scenario, backend: 'postgres' }],
        ]
      : [[name, what, scenario]],
  );
}

export const slugOf = (scenario: SluiceScenario, i: number) => (scenario.flows === 1 ? 'bench' : `f${i}`);

function target(macros: SluiceScenario['macros'], i: number): string {
  if (macros === 'none') return `https://example.com/lp/${i}`;
  if (macros === 'stream') return `https://example.com/lp/${i}?s={stream}`;
  return `https://example.com/lp/${i}?c={country}&f={flow}&s={stream}&r={request_id}`;
}

/** A stream of a seeded flow, as the scenario defines it (what storage and the reference peers get). */
export interface ScenarioStream {
  name: string;
  type: 'forced' | 'regular' | 'default';
  position: number;
  weight: number;
  filters: { countries_include?: string[]; countries_exclude?: string[] };
  target_url: string;
}

/**
 * The scenario's flows, slug and streams each: one definition that both Sluice's storage
 * ({@link seedScenario}) and the reference programs (bench/http/peers/) are given.
 */
export function scenarioFlows(
  scenario: SluiceScenario,
  from = 0,
): { slug: string; streams: ScenarioStream[] }[] {
  const flows: { slug: string; streams: ScenarioStream[] }[] = [];
  for (let f = from; f < from + scenario.flows; f++) {
    const n = Math.max(2, scenario.streams);
    const streams: ScenarioStream[] = [];
    for (let i = 0; i < n; i++) {
      const type = i === 0 ? 'forced' : i === n - 1 ? 'default' : 'regular';
      const at = (f + i) % COUNTRIES.length;
      const pick = (k: number) =>
        Array.from({ length: k }, (_, j) => COUNTRIES[(at + j) % COUNTRIES.length]!);
      const filters =
        type === 'forced'
          ? { countries_include: ['JP'] }
          : type === 'default'
            ? {}
            : i % 2 === 1
              ? { countries_include: pick(4) }
              : { countries_exclude: pick(2) };
      streams.push({
        name: `s${i}`,
        type,
        position: i,
        weight: 100 * ((i % 5) + 1),
        filters,
        target_url: target(scenario.macros, i),
      });
    }
    flows.push({ slug: slugOf(scenario, f), streams });
  }
  return flows;
}

/** Seeds the scenario's flows through the node's own storage (the cache starts empty). */
export async function seedScenario(storage: Storage, scenario: SluiceScenario, from = 0): Promise<void> {
  for (const [k, { slug, streams }] of scenarioFlows(scenario, from).entries()) {
    const flow = await storage.flows.create({
      slug,
      name: `bench ${from + k}`,
      status: 'active',
      rotation: 'weight',
    });
    for (const s of streams) {
      await storage.streams.create({
        flow_id: flow.id,
        ...s,
        status: 'active',
        redirect_code: 302,
      });
    }
  }
}

export function requestMix(scenario: SluiceScenario): RequestMix {
  const paths =
    scenario.unknown === undefined
      ? Array.from({ length: scenario.flows }, (_, i) => `/go/${slugOf(scenario, i)}`)
      : Array.from({ length: scenario.unknown }, (_, i) => `/go/nope-${i}`);
  const subs = scenario.subs === undefined ? {} : { subs: scenario.subs };
  return scenario.country
    ? { paths, header: { name: 'cf-ipcountry', values: COUNTRIES }, userAgent: BROWSER_UA, ...subs }
    : { paths, userAgent: BROWSER_UA, ...subs };
}
