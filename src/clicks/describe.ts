import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../config/index.ts';
import type { DeviceType } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import { ClickIdGenerator } from './click-id.ts';
import { ipPrefix, preferredLanguage, type QueryLike, referrerHost, subValue } from './request-facts.ts';
import { UniquenessWindow } from './uniqueness.ts';
import { UserAgentClassifier } from './user-agent.ts';
import { visitorKeyOf } from './visitor-key.ts';

/**
 * What a click is, before routing decides where it goes: the request's share of the click record
 * of docs/clicks.md#describing-a-click (the routing fields — flow, stream, outcome, country, cost — are the caller's), and what
 * stream rules (docs/routing.md#rules) and macros (docs/routing.md#macros) read. One flat object of one shape, so the hot path and the
 * click log stay monomorphic.
 */
export interface ClickFacts {
  click_id: string;
  device_type: DeviceType;
  os: string | null;
  browser: string | null;
  language: string | null;
  referrer_host: string | null;
  sub1: string | null;
  sub2: string | null;
  sub3: string | null;
  sub4: string | null;
  sub5: string | null;
  sub6: string | null;
  sub7: string | null;
  sub8: string | null;
  sub9: string | null;
  sub10: string | null;
  /** Client address as kept: IPv4 /24, IPv6 /48 (docs/clicks.md#storage); null when unknown. */
  ip_prefix: string | null;
  /** False for bots: uniques count people (bots never open a window). */
  is_unique: boolean;
  is_bot: boolean;
}

/** The sub-id fields, in order (one list for the click log, reports and macros to share). */
export const SUB_FIELDS = [
  'sub1',
  'sub2',
  'sub3',
  'sub4',
  'sub5',
  'sub6',
  'sub7',
  'sub8',
  'sub9',
  'sub10',
] as const satisfies readonly (keyof ClickFacts)[];

export interface ClickDescriberOptions {
  clock: Clock;
  /** `routing.user_agent_cache_max`. */
  userAgentCacheMax: number;
  /** The deployment's visitor-key secret ({@link visitorSecret}). */
  visitorSecret: string;
  /** `routing.uniqueness_ttl_hours`. */
  uniquenessTtlHours: number;
  /** `routing.uniqueness_max_entries`. */
  uniquenessMaxEntries: number;
  /** Keep first sightings for {@link UniquenessWindow.takeNew}: a node writes them to its database. */
  shareUniqueness: boolean;
}

const NO_QUERY: QueryLike = Object.freeze({});

/**
 * Describes a click (the `clicks/` face the hot path calls once per click): a `click_id`, the
 * user agent's device, OS, browser and bot verdict from the cache, language, referrer host,
 * sub-ids, the address prefix and uniqueness. Nothing is awaited and nothing is stored: the click
 * log is fed by the caller with the record these facts complete.
 */
export class ClickDescriber {
  readonly ids: ClickIdGenerator;
  readonly userAgents: UserAgentClassifier;
  readonly uniqueness: UniquenessWindow;

  /**
   * The describer as `routing` asks, sharing its first sightings: a node writes them to its
   * database, so nodes that share PostgreSQL agree on uniques through them, and a node (SQLite's
   * single one too) that restarts still knows who clicked (docs/clicks.md#uniqueness).
   */
  static fromConfig(
    config: Config,
    deps: Pick<ClickDescriberOptions, 'clock' | 'visitorSecret'>,
  ): ClickDescriber {
    return new ClickDescriber({
      ...deps,
      userAgentCacheMax: config.routing.user_agent_cache_max,
      uniquenessTtlHours: config.routing.uniqueness_ttl_hours,
      uniquenessMaxEntries: config.routing.uniqueness_max_entries,
      shareUniqueness: true,
    });
  }

  constructor(options: ClickDescriberOptions) {
    this.ids = new ClickIdGenerator(options.clock);
    this.userAgents = new UserAgentClassifier(options.userAgentCacheMax, options.visitorSecret);
    this.uniqueness = new UniquenessWindow({
      clock: options.clock,
      ttlHours: options.uniquenessTtlHours,
      maxEntries: options.uniquenessMaxEntries,
      share: options.shareUniqueness,
    });
  }

  /**
   * @param flowId the flow the click is on (uniqueness is per flow)
   * @param method the request method (`HEAD` is a bot)
   * @param headers the request headers (`user-agent`, `accept-language`, `referer`)
   * @param clientAddress the client's address as the server believes it (after trusted proxies)
   * @param query the parsed query string (`sub1`…`sub10`)
   * @param record false to look without opening a uniqueness window (the simulator, docs/routing.md#simulator)
   * @param person true to describe a person whose browser is not known, whatever the user agent
   *   says (the simulator asked without one): not a bot, and looked up for uniqueness
   */
  describe(
    flowId: string,
    method: string,
    headers: IncomingHttpHeaders,
    clientAddress: string | undefined,
    query: QueryLike | undefined,
    record = true,
    person = false,
  ): ClickFacts {
    const ua = headers['user-agent'];
    const agent = this.userAgents.classify(method, ua);
    const isBot = agent.is_bot && !person;
    const q = query ?? NO_QUERY;
    let isUnique = false;
    if (!isBot) {
      const key = visitorKeyOf(clientAddress, agent.visitor_seed);
      isUnique = record ? this.uniqueness.check(flowId, key) : this.uniqueness.peek(flowId, key);
    }
    return {
      click_id: this.ids.next(),
      device_type: agent.device_type,
      os: agent.os,
      browser: agent.browser,
      language: preferredLanguage(headers['accept-language']),
      referrer_host: referrerHost(headers.referer),
      sub1: subValue(q.sub1),
      sub2: subValue(q.sub2),
      sub3: subValue(q.sub3),
      sub4: subValue(q.sub4),
      sub5: subValue(q.sub5),
      sub6: subValue(q.sub6),
      sub7: subValue(q.sub7),
      sub8: subValue(q.sub8),
      sub9: subValue(q.sub9),
      sub10: subValue(q.sub10),
      ip_prefix: ipPrefix(clientAddress),
      is_unique: isUnique,
      is_bot: isBot,
    };
  }
}
