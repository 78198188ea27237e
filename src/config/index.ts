export { type BuildInfo, gitHead, resolveBuildInfo } from './build-info.ts';
export {
  ConfigError,
  EXIT_CONFIG,
  type LoadedConfig,
  type LoadOptions,
  loadConfig,
  parseCidr,
} from './loader.ts';
export { ALWAYS_REDACTED_HEADERS, isSecretKey, REDACTED, Redactor, redactConfig } from './redact.ts';
export {
  type Config,
  ConfigSchema,
  type CronTaskConfig,
  DEFAULT_CLIENT_ERROR_RATE,
  DEFAULT_TASK_P95_MS,
  DEFAULT_TASKS,
  KIND_SCOPES,
  LOG_LEVELS,
  NODE_ID_PATTERN,
  OPERATOR_NAME_PATTERN,
  POSTBACK_STATUSES,
  PROBE_DEFAULTS,
  ROLES,
  type Role,
  TASK_KINDS,
  TASK_NAME_PATTERN,
  TEXT_PATTERN,
  Text,
} from './schema.ts';
