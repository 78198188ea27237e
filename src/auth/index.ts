export { AuthLimiter, addressKey } from './auth-limiter.ts';
export { Authenticator, LAST_KNOWN_MS, type Principal, roleAllows } from './authenticator.ts';
export { OperatorDirectory } from './operator-directory.ts';
export { bootstrapAdmin, createOperator } from './operators.ts';
export { digestEquals, parseBearer, sha256, sha256Hex, TOKEN_PREFIX } from './tokens.ts';
