export { KEY_REREAD_MS, PostbackKeys } from './postback-keys.ts';
export { parsePostback, postbackDialect, postbackKey } from './postback-params.ts';
export { registerPostbackRoute } from './postback-route.ts';
