import Bowser from 'bowser';
import { isbot } from 'isbot';
import { LRUCache } from 'lru-cache';
import type { DeviceType } from '../storage/index.ts';
import { withoutControls } from './request-facts.ts';
import { userAgentSeed } from './visitor-key.ts';

/** What a user agent says about a click; shared by every click with the same user agent (frozen). */
export interface UserAgentInfo {
  readonly device_type: DeviceType;
  /** As bowser names it (`Windows`, `macOS`, `iOS`, `Android`, `Linux`, ...); null when it names none. */
  readonly os: string | null;
  /** As bowser names it (`Chrome`, `Safari`, `Firefox`, `Microsoft Edge`, `Googlebot`, ...); null when it names none. */
  readonly browser: string | null;
  /** `isbot` recognises a bot, crawler or link previewer; or the user agent is empty. */
  readonly is_bot: boolean;
  /** The user agent's share of the visitor key ({@link userAgentSeed}), hashed once per distinct user agent. */
  readonly visitor_seed: number;
}

/**
 * A user agent is read up to this many characters. Real ones are 100–500 characters long (in-app
 * browsers are the longest); the cap bounds what one cache entry can hold and what one parse can
 * cost, whatever a client sends.
 */
export const USER_AGENT_MAX_CHARS = 1024;
/** A name longer than this is cut: bowser's last resort names a browser after the user agent's first token. */
const NAME_MAX_CHARS = 64;

function name(raw: string | undefined): string | null {
  if (!raw) return null;
  const clean = withoutControls(raw).trim().slice(0, NAME_MAX_CHARS);
  return clean.length > 0 ? clean : null;
}

function deviceType(platform: string | undefined): DeviceType {
  return platform === 'desktop' || platform === 'mobile' || platform === 'tablet' ? platform : 'other';
}

/**
 * Parses one user agent; no cache. Bowser for device, OS and browser, `isbot` for bots; the
 * visitor seed keyed by `visitorSecret` (src/clicks/visitor-key.ts).
 */
export function parseUserAgent(ua: string, visitorSecret: string): UserAgentInfo {
  if (ua.length === 0)
    return Object.freeze({
      device_type: 'other',
      os: null,
      browser: null,
      is_bot: true,
      visitor_seed: userAgentSeed('', visitorSecret),
    });
  const r = Bowser.parse(ua);
  return Object.freeze({
    device_type: deviceType(r.platform.type),
    os: name(r.os.name),
    browser: name(r.browser.name),
    is_bot: isbot(ua),
    visitor_seed: userAgentSeed(ua, visitorSecret),
  });
}

/**
 * User agents classified once per distinct string and kept in a bounded LRU: the same few thousand
 * user agents make almost every click, and a parse (bowser ~10 µs, isbot ~2 µs) costs tens of times
 * a cache hit. A flood of distinct user agents costs a parse each and evicts the least recently used,
 * nothing more: an entry holds at most {@link USER_AGENT_MAX_CHARS} characters of key.
 */
export class UserAgentClassifier {
  readonly #cache: LRUCache<string, UserAgentInfo>;
  readonly #secret: string;
  readonly #empty: UserAgentInfo;
  #misses = 0;

  /** @param visitorSecret the deployment's visitor-key secret (src/clicks/visitor-secret.ts) */
  constructor(maxEntries: number, visitorSecret: string) {
    this.#cache = new LRUCache({ max: maxEntries });
    this.#secret = visitorSecret;
    this.#empty = parseUserAgent('', visitorSecret);
  }

  /**
   * The user agent's classification; `HEAD` requests, absent and empty user agents are bots
   * whatever else is true (docs/routing.md#bots). The HEAD answer is the cached one with `is_bot`
   * set.
   */
  classify(method: string, userAgent: string | undefined): UserAgentInfo {
    if (userAgent === undefined || userAgent.length === 0) return this.#empty;
    const ua = userAgent.length > USER_AGENT_MAX_CHARS ? head(userAgent) : userAgent;
    let info = this.#cache.get(ua);
    if (info === undefined) {
      this.#misses++;
      info = parseUserAgent(ua, this.#secret);
      this.#cache.set(ua, info);
    }
    return method === 'HEAD' && !info.is_bot ? headOf(info) : info;
  }

  /** Entries held, and how many classifications had to parse (for system metrics and the benchmark). */
  get size(): number {
    return this.#cache.size;
  }
  get misses(): number {
    return this.#misses;
  }
}

/**
 * The first {@link USER_AGENT_MAX_CHARS} characters as a string of their own: `slice` would keep
 * the whole header alive for as long as the cache keeps the key.
 */
function head(ua: string): string {
  return Buffer.from(ua.slice(0, USER_AGENT_MAX_CHARS), 'utf16le').toString('utf16le');
}

/** HEAD answers are rare and never on a person's click path; one small object each is fine. */
function headOf(info: UserAgentInfo): UserAgentInfo {
  return Object.freeze({ ...info, is_bot: true });
}
