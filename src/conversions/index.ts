export {
  CONVERSION_STATUSES,
  type ConversionStatus,
  microsToDecimal,
  type Postback,
  parsePostback,
  postbackKey,
  postbackKeyAccepted,
} from './postback-params.ts';
export {
  type ConversionSink,
  type PostbackAnswer,
  type PostbackRouteOptions,
  registerPostbackRoute,
} from './postback-route.ts';
