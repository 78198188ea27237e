export {
  CLICK_BATCH_MAX_ATTEMPTS,
  CLICK_BATCH_MAX_ROWS,
  ClickLog,
  type ClickLogOptions,
  type ClickLogStats,
} from './click-log.ts';
