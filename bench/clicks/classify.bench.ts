/**
 * What describing a click costs (docs/clicks.md#describing-a-click): the whole
 * `ClickDescriber.describe()` on a realistic mix (user agents from the cache), the same with a user
 * agent never seen before (a parse), and its parts — click id, visitor key, uniqueness check — with
 * `randomUUID()` as a yardstick. Cases are interleaved round by round, so each median comes from
 * the same stretch of a shared machine, and timed in process CPU time (`process.cpuUsage`), not
 * wall time: what the scheduler gives other processes is not counted (on a loaded machine wall time
 * read 3–5× longer, and far noisier). With `--expose-gc` it also weighs a uniqueness entry.
 *
 *   node --expose-gc bench/clicks/classify.bench.ts
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  ClickDescriber,
  ClickIdGenerator,
  UniquenessWindow,
  userAgentSeed,
  visitorKey,
  visitorKeyOf,
} from '../../src/clicks/index.ts';

import { systemClock } from '../../src/time/index.ts';
import { seeded } from '../../test/helpers/random.ts';
import { USER_AGENT_MIX, USER_AGENTS, VISITOR_SECRET } from '../../test/helpers/user-agents.ts';
import { median } from '../_util.ts';

const ROUNDS = 11;
const N = 200_000;
const MISS_N = 5_000;
const random = seeded(14);

// 1,000 requests drawn from the mix, replayed: user agents by weight, 5,000 client addresses,
// a few languages and referrers, sub-ids on most clicks.
const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
const uas = USER_AGENT_MIX.flatMap(([ua, w]) => Array<string>(w).fill(ua));
const languages = [
  'en-US,en;q=0.9',
  'de-DE,de;q=0.9,en;q=0.8',
  'fr-FR,fr;q=0.9',
  'es-ES,es;q=0.9,en;q=0.5',
  'pt-BR',
];
const referrers = [
  undefined,
  'https://m.facebook.com/',
  'https://www.google.com/',
  'https://t.co/abc123',
  'https://news.example.org/article/2026/11/some-story?utm_source=x',
];
const REQUESTS = Array.from({ length: 1000 }, (_, i) => {
  const headers: IncomingHttpHeaders = { 'user-agent': pick(uas), 'accept-language': pick(languages) };
  const ref = pick(referrers);
  if (ref !== undefined) headers.referer = ref;
  const query =
    i % 4 === 0 ? {} : { sub1: `campaign-${i % 37}`, sub2: `ad-${i % 911}`, sub3: 'placement_feed' };
  return {
    flow: `flow-${i % 50}`,
    method: i % 97 === 0 ? 'HEAD' : 'GET',
    headers,
    seed: userAgentSeed(headers['user-agent']!, VISITOR_SECRET),
    address: i % 10 === 0 ? `2001:db8:${i % 300}::${i}` : `198.51.${i % 200}.${(i * 7) % 250}`,
    query,
  };
});

const options = {
  clock: systemClock,
  userAgentCacheMax: 10_000,
  visitorSecret: VISITOR_SECRET,
  uniquenessTtlHours: 24,
  uniquenessMaxEntries: 1_000_000,
  shareUniqueness: true,
};
const hits = new ClickDescriber(options);
const misses = new ClickDescriber(options);
const ids = new ClickIdGenerator(systemClock);
const window = new UniquenessWindow({
  clock: systemClock,
  ttlHours: 24,
  maxEntries: 1_000_000,
  share: false,
});
const FLOWS = Array.from({ length: 50 }, (_, i) => `flow-${i}`);
const keys = Array.from({ length: 100_000 }, (_, i) =>
  visitorKey(`198.51.${i >> 8}.${i & 255}`, USER_AGENTS.safariIphone, VISITOR_SECRET),
);

let sink = 0;
let missSeq = 0;
const cases: Record<string, { n: number; run: (n: number) => void }> = {
  'describe(), realistic mix, user agent cached': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++) {
        const r = REQUESTS[i % REQUESTS.length]!;
        sink += hits.describe(r.flow, r.method, r.headers, r.address, r.query).click_id.length;
      }
    },
  },
  'describe(), user agent never seen (parse)': {
    n: MISS_N,
    run: (n) => {
      for (let i = 0; i < n; i++) {
        const r = REQUESTS[i % REQUESTS.length]!;
        const headers = { ...r.headers, 'user-agent': `${r.headers['user-agent']} build/${missSeq++}` };
        sink += misses.describe(r.flow, r.method, headers, r.address, r.query).click_id.length;
      }
    },
  },
  'click id': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++) sink += ids.next().length;
    },
  },
  'randomUUID() (yardstick)': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++) sink += randomUUID().length;
    },
  },
  'visitor key, user agent seed cached (per click)': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++) {
        const r = REQUESTS[i % REQUESTS.length]!;
        sink += visitorKeyOf(r.address, r.seed) & 1;
      }
    },
  },
  'visitor key from the raw pair (HMAC-SHA-256 + mix)': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++) {
        const r = REQUESTS[i % REQUESTS.length]!;
        sink += visitorKey(r.address, r.headers['user-agent'], VISITOR_SECRET) & 1;
      }
    },
  },
  'uniqueness check, 100k visitors × 50 flows': {
    n: N,
    run: (n) => {
      for (let i = 0; i < n; i++)
        sink += window.check(FLOWS[i % 50]!, keys[(i * 7919) % keys.length]!) ? 1 : 0;
    },
  },
};

const times = new Map<string, number[]>(Object.keys(cases).map((k) => [k, []]));
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const [name, c] of Object.entries(cases)) {
    const t0 = process.cpuUsage();
    c.run(c.n);
    const used = process.cpuUsage(t0);
    if (r > 0) times.get(name)!.push(((used.user + used.system) * 1000) / c.n);
  }
}
const spread = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[Math.floor(s.length * 0.1)]!.toFixed(0)}–${s[Math.floor(s.length * 0.9)]!.toFixed(0)}`;
};
const med = new Map([...times].map(([k, v]) => [k, median(v)]));
for (const [name, xs] of times)
  console.log(`${name}: ${med.get(name)!.toFixed(0)} CPU-ns/op median (p10–p90 ${spread(xs)})`);
const hit = med.get('describe(), realistic mix, user agent cached')!;
console.log(
  `ratios: miss / hit ${(med.get('describe(), user agent never seen (parse)')! / hit).toFixed(1)}×; ` +
    `visitor key per click / from the raw pair ${(med.get('visitor key, user agent seed cached (per click)')! / med.get('visitor key from the raw pair (HMAC-SHA-256 + mix)')!).toFixed(2)}×; ` +
    `click id / randomUUID ${(med.get('click id')! / med.get('randomUUID() (yardstick)')!).toFixed(2)}×; ` +
    `visitor key per click / a cached describe ${((100 * med.get('visitor key, user agent seed cached (per click)')!) / hit).toFixed(0)} %`,
);
console.log(
  `user-agent cache: ${hits.userAgents.size} entries, ${hits.userAgents.misses} parses for ${(ROUNDS + 1) * N} clicks`,
);

const gc = (globalThis as { gc?: () => void }).gc;
if (gc) {
  // Weighs (flow, visitor) pairs as the hot path makes them: keys from visitorKey(, VISITOR_SECRET), 50 flows.
  const COUNT = 1_000_000;
  const made = Array.from({ length: COUNT }, (_, i) =>
    visitorKey(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, 'ua', VISITOR_SECRET),
  );
  const flows = Array.from(
    { length: 50 },
    (_, i) => `0f6c3d8e-1a2b-4c5d-8e9f-${String(i).padStart(12, '0')}`,
  );
  gc();
  const before = process.memoryUsage().heapUsed;
  const u = new UniquenessWindow({ clock: systemClock, ttlHours: 24, maxEntries: COUNT, share: false });
  for (let i = 0; i < COUNT; i++) u.check(flows[i % 50]!, made[i]!);
  gc();
  const structure = (process.memoryUsage().heapUsed - before) / COUNT;
  console.log(
    `uniqueness memory: ${structure.toFixed(0)} B a pair held (maps, ring and the boxed 52-bit key), ` +
      `${u.size} pairs`,
  );
} else console.log('(run with --expose-gc to weigh a uniqueness entry)');
if (sink === 0) console.log('unexpected: nothing measured');
