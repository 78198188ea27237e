export { AuthLimiter, type AuthLimiterOptions, addressKey } from './auth-limiter.ts';
export {
  Authenticator,
  type ConfiguredOperator,
  LAST_KNOWN_MS,
  type Principal,
  roleAllows,
} from './authenticator.ts';
export { OperatorDirectory, type OperatorItem } from './operator-directory.ts';
export { bootstrapAdmin, createOperator } from './operators.ts';
export { digestEquals, generateToken, parseBearer, sha256, sha256Hex, TOKEN_PREFIX } from './tokens.ts';
