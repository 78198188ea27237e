export { gitHead, resolveBuildInfo } from './build-info.ts';
export { ConfigError, type LoadOptions, loadConfig, parseCidr } from './loader.ts';
export { REDACTED, Redactor, redactConfig } from './redact.ts';
export {
  type Config,
  ConfigSchema,
  type CronTaskConfig,
  DEFAULT_CLIENT_ERROR_RATE,
  DEFAULT_TASK_P95_MS,
  DEFAULT_TASKS,
  KIND_SCOPES,
  OPERATOR_NAME_PATTERN,
  POSTBACK_STATUSES,
  PROBE_DEFAULTS,
  ROLES,
  type Role,
  TEXT_PATTERN,
  Text,
} from './schema.ts';
export { ownTimerMs } from './task-or-timer.ts';
