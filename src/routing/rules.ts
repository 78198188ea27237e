import type { ClickFacts, QueryLike } from '../clicks/index.ts';
import { isCountryCode } from '../http/index.ts';
import { type TimeSlice, zoneFormat } from '../time/index.ts';
import { compileIpRanges, type IpRanges, ipRangesMatch, ipValueProblem } from './ip-ranges.ts';

/**
 * Stream targeting rules (docs/routing.md#rules): `filters.rules` of `{field, op: is|is_not, values}` joined by
 * `filters.logic` (and|or). Validated when written ({@link ruleProblems}), compiled once per flow
 * when it is cached ({@link compileRules}: sets, merged IP ranges, suffix lists, hour masks), and
 * matched per click without allocating ({@link rulesPass}).
 */

export const RULE_FIELDS = [
  'country',
  'device_type',
  'os',
  'browser',
  'language',
  'ip',
  'referrer_host',
  'weekday',
  'hour',
  'is_unique',
  'is_bot',
] as const;
export type RuleField = (typeof RULE_FIELDS)[number] | `param:${string}`;
export const PARAM_FIELD = /^param:([A-Za-z0-9_.-]{1,64})$/;
export const DEVICE_TYPES = ['desktop', 'mobile', 'tablet', 'other'] as const;
export const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;

export interface Rule {
  field: string;
  op: 'is' | 'is_not';
  values: (string | boolean)[];
}

export interface StreamFilters {
  countries_include?: string[];
  countries_exclude?: string[];
  logic?: 'and' | 'or';
  rules?: Rule[];
}

/**
 * Filters as they are stored: country codes upper case, each once, in the order given — `de` is
 * the same country as `DE`, as a proxy's `cf-ipcountry: de` is read (a filter refused it, a
 * `country` rule took it as typed).
 */
export function normaliseFilters(filters: StreamFilters): StreamFilters {
  const codes = (list: readonly string[]) => [...new Set(list.map((c) => c.toUpperCase()))];
  const out: StreamFilters = { ...filters };
  if (filters.countries_include !== undefined) out.countries_include = codes(filters.countries_include);
  if (filters.countries_exclude !== undefined) out.countries_exclude = codes(filters.countries_exclude);
  if (filters.rules !== undefined)
    out.rules = filters.rules.map((r) =>
      r.field === 'country'
        ? { ...r, values: [...new Set(r.values.map((v) => (typeof v === 'string' ? v.toUpperCase() : v)))] }
        : r,
    );
  return out;
}

/** What the rules look at: one click as /go (or the simulator) sees it. */
export interface Visitor {
  country: string | undefined;
  facts: Pick<
    ClickFacts,
    'device_type' | 'os' | 'browser' | 'language' | 'referrer_host' | 'is_unique' | 'is_bot'
  >;
  /** The client's address (after trusted proxies); undefined when unknown. */
  client: string | undefined;
  query: QueryLike;
  /** When the click happened, epoch ms. */
  at: number;
}

/** A rule ready for matching: one of these shapes by field, plus the op. */
type Matcher =
  | { kind: 'set'; get: (v: Visitor) => string | null | undefined; set: ReadonlySet<string> }
  | { kind: 'ip'; ranges: IpRanges }
  | {
      kind: 'referrer';
      exact: ReadonlySet<string>;
      /** `.example.com` of each `*.example.com`: tried in turn when few, looked up by the host's dots when many. */
      suffixes: readonly string[];
      suffixSet: ReadonlySet<string> | undefined;
    }
  | { kind: 'param'; name: string; set: ReadonlySet<string> }
  | { kind: 'weekday'; mask: number }
  | { kind: 'hour'; mask: number }
  | { kind: 'bool'; get: (v: Visitor) => boolean; set: ReadonlySet<boolean> };

export interface CompiledRule {
  field: string;
  negate: boolean;
  matcher: Matcher;
  /** The rule as written (the simulator explains with it). */
  source: Rule;
}

export interface CompiledRules {
  any: boolean;
  rules: readonly CompiledRule[];
  /** The flow's IANA time zone, for weekday and hour. */
  timezone: string;
}

const lower = (s: string) => s.toLowerCase();
const getters: Record<string, (v: Visitor) => string | null | undefined> = {
  country: (v) => v.country,
  device_type: (v) => v.facts.device_type,
  os: (v) => (v.facts.os === null ? null : lower(v.facts.os)),
  browser: (v) => (v.facts.browser === null ? null : lower(v.facts.browser)),
  language: (v) => v.facts.language,
};

/** `"9-17"` → hours 9..17; `"22-3"` wraps midnight; `"5"` is one hour. Undefined when malformed. */
export function hourMask(range: string): number | undefined {
  const m = /^(\d{1,2})(?:-(\d{1,2}))?$/.exec(range);
  if (m === null) return undefined;
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  if (from > 23 || to > 23) return undefined;
  let mask = 0;
  for (let h = from; ; h = (h + 1) % 24) {
    mask |= 1 << h;
    if (h === to) break;
  }
  return mask;
}

/**
 * Up to this many `*.suffix` values a rule tries each with `endsWith` (no allocation); more are
 * looked up by each dot of the host, so 1,000 suffixes cost a click a few lookups, not 1,000 tries.
 */
const FEW_SUFFIXES = 16;

function compileRule(rule: Rule): CompiledRule {
  const strings = rule.values.filter((x): x is string => typeof x === 'string');
  const negate = rule.op === 'is_not';
  const field = rule.field;
  const param = PARAM_FIELD.exec(field);
  let matcher: Matcher;
  if (param !== null) matcher = { kind: 'param', name: param[1]!, set: new Set(strings) };
  else if (field === 'ip') matcher = { kind: 'ip', ranges: compileIpRanges(strings) };
  else if (field === 'referrer_host') {
    const exact = new Set<string>();
    const suffixes: string[] = [];
    for (const h of strings.map(lower)) {
      // `*.example.com` matches example.com's subdomains (and, as people mean it, example.com).
      if (h.startsWith('*.')) {
        suffixes.push(h.slice(1));
        exact.add(h.slice(2));
      } else exact.add(h);
    }
    matcher = {
      kind: 'referrer',
      exact,
      suffixes,
      suffixSet: suffixes.length > FEW_SUFFIXES ? new Set(suffixes) : undefined,
    };
  } else if (field === 'weekday') {
    let mask = 0;
    for (const d of strings) mask |= 1 << WEEKDAYS.indexOf(lower(d) as (typeof WEEKDAYS)[number]);
    matcher = { kind: 'weekday', mask };
  } else if (field === 'hour') {
    let mask = 0;
    for (const r of strings) mask |= hourMask(r) ?? 0;
    matcher = { kind: 'hour', mask };
  } else if (field === 'is_unique' || field === 'is_bot') {
    const key = field;
    matcher = {
      kind: 'bool',
      get: (v) => v.facts[key],
      set: new Set(rule.values.filter((x): x is boolean => typeof x === 'boolean')),
    };
  } else {
    const fold = field === 'os' || field === 'browser' || field === 'language' || field === 'device_type';
    matcher = {
      kind: 'set',
      get: getters[field]!,
      set: new Set(fold ? strings.map(lower) : strings.map((s) => s.toUpperCase())),
    };
  }
  return { field, negate, matcher, source: rule };
}

/** Rules compiled once per flow (cache fill); undefined when the stream has none. */
export function compileRules(filters: StreamFilters, timezone: string): CompiledRules | undefined {
  if (!filters.rules?.length) return undefined;
  return { any: filters.logic === 'or', rules: filters.rules.map(compileRule), timezone };
}

/**
 * {@link compileRules} pausing on `slice` before each rule: a flow's compile then holds the event
 * loop for one rule (at most 1,000 values, well under a millisecond) before timers and sockets get
 * their turn, however many rules the flow has.
 */
export async function compileRulesSliced(
  filters: StreamFilters,
  timezone: string,
  slice: TimeSlice,
): Promise<CompiledRules | undefined> {
  if (!filters.rules?.length) return undefined;
  const rules: CompiledRule[] = [];
  for (const rule of filters.rules) {
    await slice.pause();
    rules.push(compileRule(rule));
  }
  return { any: filters.logic === 'or', rules, timezone };
}

/** Local time of a minute in a zone: weekday (0 = Sunday), hour, and the day as `YYYY-MM-DD`. */
export interface LocalTime {
  minute: number;
  weekday: number;
  hour: number;
  day: string;
}
const localCache = new Map<string, LocalTime>();
/**
 * Weekday, hour and day of `at` in `timezone` (rules, daily caps). Worked out once a minute per
 * time zone (offsets change on minute boundaries at most), so a click pays a map lookup, not ICU.
 */
export function localTime(at: number, timezone: string): LocalTime {
  const minute = Math.floor(at / 60_000);
  const hit = localCache.get(timezone);
  if (hit !== undefined && hit.minute === minute) return hit;
  const f = zoneFormat(timezone);
  let weekday = 0;
  let hour = 0;
  let y = '';
  let m = '';
  let d = '';
  for (const p of f.formatToParts(minute * 60_000)) {
    if (p.type === 'weekday') weekday = WEEKDAYS.indexOf(lower(p.value) as (typeof WEEKDAYS)[number]);
    else if (p.type === 'hour') hour = Number(p.value) % 24;
    else if (p.type === 'year') y = p.value;
    else if (p.type === 'month') m = p.value;
    else if (p.type === 'day') d = p.value;
  }
  const entry = { minute, weekday, hour, day: `${y}-${m}-${d}` };
  // A rule set with an unknown time zone is refused when written; this map holds one per zone used.
  localCache.set(timezone, entry);
  return entry;
}

/**
 * Whether one rule's field matches (before `is_not` is applied); `undefined` when the click has no
 * value for the field (no country, no language, no such parameter): such a rule fails `is` and
 * passes `is_not` (docs/routing.md#rules).
 */
function matches(m: Matcher, v: Visitor, timezone: string): boolean | undefined {
  switch (m.kind) {
    case 'set': {
      const x = m.get(v);
      return x === null || x === undefined ? undefined : m.set.has(x);
    }
    case 'ip':
      return v.client === undefined ? undefined : ipRangesMatch(m.ranges, v.client);
    case 'referrer': {
      const h = v.facts.referrer_host;
      if (h === null) return undefined;
      if (m.exact.has(h)) return true;
      const set = m.suffixSet;
      if (set !== undefined) {
        for (let i = h.indexOf('.'); i !== -1; i = h.indexOf('.', i + 1))
          if (set.has(h.slice(i))) return true;
        return false;
      }
      for (let i = 0; i < m.suffixes.length; i++) if (h.endsWith(m.suffixes[i]!)) return true;
      return false;
    }
    case 'param': {
      const raw = v.query[m.name];
      if (raw === undefined) return undefined;
      if (typeof raw === 'string') return m.set.has(raw);
      for (let i = 0; i < raw.length; i++) if (m.set.has(raw[i]!)) return true;
      return false;
    }
    case 'weekday':
      return (m.mask & (1 << localTime(v.at, timezone).weekday)) !== 0;
    case 'hour':
      return (m.mask & (1 << localTime(v.at, timezone).hour)) !== 0;
    case 'bool':
      return m.set.has(m.get(v));
  }
}

/** One rule's verdict for a click (`is_not` applied; an unknown value fails `is`, passes `is_not`). */
export function rulePasses(r: CompiledRule, v: Visitor, timezone: string): boolean {
  const hit = matches(r.matcher, v, timezone);
  return hit === undefined ? r.negate : hit !== r.negate;
}

/** Whether a stream's rules let the click through: all of them (`and`) or any (`or`). */
export function rulesPass(c: CompiledRules, v: Visitor): boolean {
  const rules = c.rules;
  if (c.any) {
    for (let i = 0; i < rules.length; i++) if (rulePasses(rules[i]!, v, c.timezone)) return true;
    return false;
  }
  for (let i = 0; i < rules.length; i++) if (!rulePasses(rules[i]!, v, c.timezone)) return false;
  return true;
}

/** Whether rules accept a bot (`bot_action: stream`): they pass some `is_bot` rule with `true`. */
export function acceptsBots(filters: StreamFilters): boolean {
  return (filters.rules ?? []).some(
    (r) => r.field === 'is_bot' && r.values.includes(true) !== (r.op === 'is_not'),
  );
}

interface Problem {
  path: string;
  message: string;
}

const HOST = /^(\*\.)?([a-z0-9-]{1,63}\.)*[a-z0-9-]{1,63}$/i;

/** What is wrong with one value of a rule on a known field; undefined when nothing is. */
function valueProblem(field: string, value: string | boolean): string | undefined {
  if (field === 'is_unique' || field === 'is_bot')
    return typeof value === 'boolean' ? undefined : `is not a boolean; ${field} takes true or false`;
  if (typeof value !== 'string') return `is not a string; ${field} takes strings`;
  switch (field) {
    case 'ip':
      return ipValueProblem(value);
    case 'country':
      return isCountryCode(value.toUpperCase())
        ? undefined
        : 'is not an ISO 3166-1 alpha-2 country code (e.g. DE)';
    case 'device_type':
      return (DEVICE_TYPES as readonly string[]).includes(lower(value))
        ? undefined
        : `is not a device type; expected one of ${DEVICE_TYPES.join(', ')}`;
    case 'language':
      return /^[a-z]{2,3}$/i.test(value) ? undefined : 'is not a primary language subtag (e.g. de, en)';
    case 'referrer_host':
      return HOST.test(value) ? undefined : 'is not a host name or *.suffix';
    case 'weekday':
      return (WEEKDAYS as readonly string[]).includes(lower(value))
        ? undefined
        : 'is not a weekday; expected one of mon, tue, wed, thu, fri, sat, sun';
    case 'hour':
      return hourMask(value) === undefined
        ? 'is not an hour range; expected "H" or "H-H" with hours 0–23, e.g. "9-17" or "22-3"'
        : undefined;
    default:
      return undefined;
  }
}

/** The problems of one rule (at `at`), added to `out`. */
function problemsOfRule(rule: Rule, at: string, out: Problem[]): void {
  const field = rule.field;
  const known = (RULE_FIELDS as readonly string[]).includes(field) || PARAM_FIELD.test(field);
  if (!known) {
    out.push({
      path: `${at}/field`,
      message: `"${field}" is not a rule field; expected one of ${RULE_FIELDS.join(', ')} or param:NAME`,
    });
    return;
  }
  const values = rule.values;
  for (let j = 0; j < values.length; j++) {
    const problem = valueProblem(field, values[j]!);
    if (problem !== undefined)
      out.push({ path: `${at}/values/${j}`, message: `${JSON.stringify(values[j])} ${problem}` });
  }
}

/**
 * Every problem with a stream's rules, each naming the rule, field and value
 * (docs/routing.md#rules).
 */
export function ruleProblems(filters: StreamFilters | undefined, base = '/filters'): Problem[] {
  const out: Problem[] = [];
  const rules = filters?.rules ?? [];
  for (let i = 0; i < rules.length; i++) problemsOfRule(rules[i]!, `${base}/rules/${i}`, out);
  return out;
}

/**
 * {@link ruleProblems} pausing on `slice` before each rule: a stream of 50 rules of 1,000 values
 * is checked in pieces of under a millisecond, not in one stretch of tens of milliseconds.
 */
export async function ruleProblemsSliced(
  filters: StreamFilters | undefined,
  slice: TimeSlice,
  base = '/filters',
): Promise<Problem[]> {
  const out: Problem[] = [];
  const rules = filters?.rules ?? [];
  for (let i = 0; i < rules.length; i++) {
    await slice.pause();
    problemsOfRule(rules[i]!, `${base}/rules/${i}`, out);
  }
  return out;
}
