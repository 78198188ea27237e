/**
 * `sub1` … `sub10` (docs/clicks.md#storage): incoming query parameters kept with the click, at most
 * 256 characters each. A module of its own so the click, conversion and report stores share it
 * without importing one another.
 */
export const SUB_ID_COUNT = 10;
export const SUB_ID_MAX_LENGTH = 256;
export type SubIds = { [K in `sub${1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10}`]: string | null };
/** The sub-id columns, in order, as the click log and the conversions name them. */
export const SUB_COLUMNS = Array.from({ length: SUB_ID_COUNT }, (_, i) => `sub${i + 1}`) as (keyof SubIds)[];
