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
}

/**
 * What the load generator sends: a random path, a random header value when there are some, and a
 * user agent on every request when set.
 */
export interface RequestMix {
  paths: string[];
  header?: { name: string; values: string[] };
  /** A browser's: a request without one is a bot (§11), which skips the uniqueness check. */
  userAgent?: string;
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

export const slugOf = (scenario: SluiceScenario, i: number) => (scenario.flows === 1 ? 'bench' : `f${i}`);

function target(macros: SluiceScenario['macros'], i: number): string {
  if (macros === 'none') return `https://example.com/lp/${i}`;
  if (macros === 'stream') return `https://example.com/lp/${i}?s={stream}`;
  return `https://example.com/lp/${i}?c={country}&f={flow}&s={stream}&r={request_id}`;
}

/** Seeds the scenario's flows through the node's own storage (the cache starts empty). */
export async function seedScenario(storage: Storage, scenario: SluiceScenario, from = 0): Promise<void> {
  for (let f = from; f < from + scenario.flows; f++) {
    const flow = await storage.flows.create({
      slug: slugOf(scenario, f),
      name: `bench ${f}`,
      status: 'active',
      rotation: 'weight',
    });
    const n = Math.max(2, scenario.streams);
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
      await storage.streams.create({
        flow_id: flow.id,
        name: `s${i}`,
        type,
        position: i,
        weight: 100 * ((i % 5) + 1),
        status: 'active',
        filters,
        target_url: target(scenario.macros, i),
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
  return scenario.country
    ? { paths, header: { name: 'cf-ipcountry', values: COUNTRIES }, userAgent: BROWSER_UA }
    : { paths, userAgent: BROWSER_UA };
}
