export {
  type Postback,
  type PostbackDialect,
  parsePostback,
  postbackDialect,
  postbackKey,
  postbackKeyAccepted,
} from './postback-params.ts';
export { type PostbackAnswer, type PostbackRouteOptions, registerPostbackRoute } from './postback-route.ts';
