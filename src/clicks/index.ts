export { CLICK_ID_LENGTH, CLICK_ID_PATTERN, CLICK_ID_RE, ClickIdGenerator, clickIdTime } from './click-id.ts';
export {
  ClickDescriber,
  type ClickDescriberOptions,
  type ClickFacts,
  SUB_FIELDS,
} from './describe.ts';
export {
  canonicalAddress,
  ipPrefix,
  preferredLanguage,
  type QueryLike,
  referrerHost,
  SUB_MAX_CHARS,
  subValue,
} from './request-facts.ts';
export { type SeenVisitor, type UniquenessOptions, UniquenessWindow } from './uniqueness.ts';
export {
  DEVICE_TYPES,
  type DeviceType,
  parseUserAgent,
  USER_AGENT_MAX_CHARS,
  UserAgentClassifier,
  type UserAgentInfo,
} from './user-agent.ts';
export { userAgentSeed, visitorKey, visitorKeyOf } from './visitor-key.ts';
