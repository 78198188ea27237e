/**
 * What one flow may hold (docs/routing.md#limits). Compiling a flow and judging a click against
 * it run on the event loop, so these bound the work any configuration a role can write makes a
 * node do: at these sizes a flow compiles in a few tens of milliseconds, yielding between rules,
 * and holds a few megabytes. Each is checked when written and refused with `400
 * validation.invalid_input` naming it.
 */
export const FLOW_LIMITS = {
  /** Streams of one flow, paused ones included. */
  streamsPerFlow: 1_000,
  /** Rules in one stream's `filters.rules`. */
  rulesPerStream: 50,
  /** Values of one rule. */
  valuesPerRule: 1_000,
  /** Rule values across every stream of a flow (an `ip` rule's CIDR blocks are most of them in practice). */
  ruleValuesPerFlow: 100_000,
  /** Characters of one rule value. */
  valueLength: 256,
  /** Codes in `countries_include` or `countries_exclude`. */
  countriesPerList: 300,
  /** Characters of a `target_url`, as written and once normalised. */
  targetUrlLength: 2_048,
} as const;

/** A number as the limits are written in messages and docs (`100,000`). */
export const count = (n: number) => n.toLocaleString('en-US');

/** How many rule values filters hold. */
export function ruleValueCount(
  filters: { rules?: readonly { values: readonly unknown[] }[] } | undefined,
): number {
  let n = 0;
  for (const r of filters?.rules ?? []) n += r.values.length;
  return n;
}
