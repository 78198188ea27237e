export {
  CLICK_ID_LENGTH,
  CLICK_ID_RANDOM_CHARS,
  CLICK_ID_RE,
  ClickIdGenerator,
  clickIdTime,
} from './click-id.ts';
export { CLICK_BATCH_MAX_ATTEMPTS, ClickLog, type CountsCut, OVERFLOW_REPORT_EVERY_MS } from './click-log.ts';
export { ClickDescriber, type ClickFacts, SUB_FIELDS } from './describe.ts';
export {
  canonicalAddress,
  ipPrefix,
  preferredLanguage,
  type QueryLike,
  referrerHost,
  subValue,
} from './request-facts.ts';
export { type SeenVisitor, UniquenessWindow } from './uniqueness.ts';
export { SIGHTINGS_PRUNE_EVERY_MS, UniquenessExchange } from './uniqueness-exchange.ts';
export {
  parseUserAgent,
  USER_AGENT_MAX_CHARS,
  UserAgentClassifier,
  type UserAgentInfo,
} from './user-agent.ts';
export { userAgentSeed, visitorKey, visitorKeyOf } from './visitor-key.ts';
export { VISITOR_SECRET_NAME, visitorSecret } from './visitor-secret.ts';
