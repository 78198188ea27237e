export { type Clock, ManualClock, systemClock } from './clock.ts';
export { retryUntil } from './retry.ts';
export { TimeSlice } from './time-slice.ts';
export { canonicalTimeZone, TIME_ZONE_EXPECTED, zoneFormat } from './zones.ts';
