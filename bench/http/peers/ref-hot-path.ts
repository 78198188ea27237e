/**
 * The `/go/:slug` job of a reference program, as a competent developer would write it with no
 * framework of Sluice's: what bench/http/peers/ref-ua.ts (SQLite) and ref-ua-pg.ts (PostgreSQL)
 * share. Per request: the flow from an in-memory map by slug, the country from the trusted
 * header, a stream picked as Sluice picks (forced, then weighted among the regular ones whose
 * country filters pass, then the default), a click id made as Sluice makes them, the user agent
 * classified once per distinct string (bowser + isbot, kept in an lru-cache), the target's macros
 * filled in, the click handed to its writer as one row, and a 302. None of Sluice's code is used:
 * this is the bar Sluice's `/go` is measured against (bench/routing/hot-path.bench.ts).
 */
import { randomFillSync, randomUUID } from 'node:crypto';
import Bowser from 'bowser';
import Fastify, { type FastifyInstance } from 'fastify';
import { isbot } from 'isbot';
import { LRUCache } from 'lru-cache';
import { type SluiceScenario, scenarioFlows } from '../scenarios.ts';
import type { ClickRow } from './ref-columns.ts';

interface RefStream {
  id: string;
  weight: number;
  include: Set<string> | undefined;
  exclude: Set<string> | undefined;
  /** The target cut at its macros: literal, macro name, literal, … (odd indexes are names). */
  parts: string[];
  slug: string;
}
interface RefFlow {
  id: string;
  forced: RefStream[];
  regular: RefStream[];
  fallback: RefStream[];
}

/** The scenario's flows, keyed by slug, with ids as long as Sluice's (UUIDs). */
export function refFlows(scenario: SluiceScenario): Map<string, RefFlow> {
  const flows = new Map<string, RefFlow>();
  for (const { slug, streams } of scenarioFlows(scenario)) {
    const flow: RefFlow = { id: randomUUID(), forced: [], regular: [], fallback: [] };
    for (const s of streams) {
      const inc = s.filters.countries_include;
      const exc = s.filters.countries_exclude;
      const stream = {
        id: randomUUID(),
        weight: s.weight,
        include: inc && new Set(inc),
        exclude: exc && new Set(exc),
        parts: s.target_url.split(/\{(country|flow|stream|request_id)\}/),
        slug,
      };
      (s.type === 'forced' ? flow.forced : s.type === 'regular' ? flow.regular : flow.fallback).push(stream);
    }
    flows.set(slug, flow);
  }
  return flows;
}

const passes = (s: RefStream, country: string | undefined) =>
  (s.include === undefined || (country !== undefined && s.include.has(country))) &&
  (s.exclude === undefined || country === undefined || !s.exclude.has(country));

function pick(flow: RefFlow, country: string | undefined): RefStream | undefined {
  for (const s of flow.forced) if (passes(s, country)) return s;
  let total = 0;
  for (const s of flow.regular) if (passes(s, country)) total += s.weight;
  let r = Math.random() * total;
  for (const s of flow.regular) {
    if (!passes(s, country)) continue;
    r -= s.weight;
    if (r < 0) return s;
  }
  return flow.fallback.find((s) => passes(s, country));
}

const ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** Click ids as Sluice's: 8 characters of milliseconds, 14 from a pooled CSPRNG buffer (84 bits). */
export class RefClickIds {
  #pool = Buffer.allocUnsafe(16_384);
  #used = this.#pool.length;
  #ms = -1;
  #prefix = '';
  next(now: number): string {
    if (now !== this.#ms) {
      this.#ms = now;
      let v = now;
      let p = '';
      for (let i = 0; i < 8; i++, v = Math.floor(v / 64)) p = ALPHABET[v % 64]! + p;
      this.#prefix = p;
    }
    if (this.#used + 14 > this.#pool.length) {
      randomFillSync(this.#pool);
      this.#used = 0;
    }
    let id = this.#prefix;
    for (let i = 0; i < 14; i++) id += ALPHABET[this.#pool[this.#used++]! & 63];
    return id;
  }
}

interface UaInfo {
  device: string;
  os: string;
  browser: string;
  bot: number;
}
const uaCache = new LRUCache<string, UaInfo>({ max: 10_000 });
function classify(ua: string): UaInfo {
  let info = uaCache.get(ua);
  if (info === undefined) {
    const r = Bowser.parse(ua);
    const t = r.platform.type;
    info = {
      device: t === 'desktop' || t === 'mobile' || t === 'tablet' ? t : 'other',
      os: r.os.name ?? '',
      browser: r.browser.name ?? '',
      bot: ua === '' || isbot(ua) ? 1 : 0,
    };
    uaCache.set(ua, info);
  }
  return info;
}

const TRUSTED = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/** A fastify app answering `/go/:slug` (and `/healthz`), each click handed to `write`. */
export function refApp(flows: Map<string, RefFlow>, write: (row: ClickRow) => void): FastifyInstance {
  const app = Fastify();
  const ids = new RefClickIds();
  app.get<{ Params: { slug: string }; Querystring: { sub1?: string } }>('/go/:slug', (req, reply) => {
    const flow = flows.get(req.params.slug);
    if (flow === undefined) return reply.code(404).send();
    // The country header counts only from a trusted proxy (loopback here), as Sluice's default.
    const h = TRUSTED.has(req.socket.remoteAddress ?? '') ? req.headers['cf-ipcountry'] : undefined;
    const country = typeof h === 'string' && h.length === 2 ? h : undefined;
    const stream = pick(flow, country);
    if (stream === undefined) return reply.code(404).send();
    const now = Date.now();
    const id = ids.next(now);
    const ua = classify(req.headers['user-agent'] ?? '');
    const sub1 = req.query.sub1;
    write([
      id,
      flow.id,
      stream.id,
      now,
      country ?? null,
      ua.device,
      ua.os,
      ua.browser,
      typeof sub1 === 'string' ? sub1.slice(0, 256) : null,
      ua.bot,
    ]);
    let location = stream.parts[0]!;
    for (let i = 1; i < stream.parts.length; i += 2) {
      const m = stream.parts[i];
      const v =
        m === 'country' ? (country ?? '') : m === 'flow' ? stream.slug : m === 'stream' ? stream.id : id;
      location += encodeURIComponent(v) + stream.parts[i + 1];
    }
    return reply.code(302).header('location', location).send();
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  return app;
}
