/**
 * What the reference programs (bench/http/peers/) store of a click, shared by their HTTP side and
 * their writers (the SQLite writer thread loads this and nothing of the HTTP side).
 */

/**
 * The click row's columns, in order: what both writers store (the values of {@link ClickRow};
 * `created_at` crosses as epoch milliseconds and is stored as ISO text, as Sluice's).
 */
export const REF_COLUMNS = [
  'click_id',
  'flow_id',
  'stream_id',
  'created_at',
  'country',
  'device_type',
  'os',
  'browser',
  'sub1',
  'is_bot',
] as const;
export type ClickRow = [
  string,
  string,
  string,
  number,
  string | null,
  string,
  string,
  string,
  string | null,
  number,
];
