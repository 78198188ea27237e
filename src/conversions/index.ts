export {
  KEY_REREAD_MS,
  MAX_PREVIOUS_KEYS,
  POSTBACK_KEY_PREFIX,
  POSTBACK_KEY_SECRET,
  PostbackKeys,
} from './postback-keys.ts';
export {
  type Postback,
  type PostbackDialect,
  parsePostback,
  postbackDialect,
  postbackKey,
} from './postback-params.ts';
export { type PostbackAnswer, type PostbackRouteOptions, registerPostbackRoute } from './postback-route.ts';
