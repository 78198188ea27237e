import { type ClickFacts, SUB_FIELDS } from '../clicks/index.ts';
import { ApiError } from '../errors/index.ts';
import { isCountryCode } from '../http/index.ts';
import { FLOW_LIMITS } from './limits.ts';

/** The click's own fields a target may carry: what the click's description says of the request. */
const CLICK_MACROS = [
  'click_id',
  'device_type',
  'os',
  'browser',
  'language',
  ...SUB_FIELDS,
] as const satisfies readonly (keyof ClickFacts)[];
/**
 * Macros a stream's target_url may hold (docs/routing.md#macros), besides `{param:NAME}`
 * ({@link PARAM_MACRO}): where the click went, the request's id, then the click's fields.
 */
export const MACROS = ['country', 'flow', 'stream', 'request_id', ...CLICK_MACROS] as const;
export type Macro = (typeof MACROS)[number];
/**
 * `{param:NAME}`: the incoming query parameter NAME (docs/routing.md#macros). NAME is 1–64 of `[A-Za-z0-9_.-]`, the
 * characters parameter names are made of in practice; anything else is refused when the target is
 * written, so a stored target never holds a macro the hot path cannot fill.
 */
export const PARAM_MACRO = /^param:([A-Za-z0-9_.-]{1,64})$/;
const isMacro = (name: string) => (MACROS as readonly string[]).includes(name) || PARAM_MACRO.test(name);

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$';
export const SLUG = new RegExp(SLUG_PATTERN);
const MAX_URL = FLOW_LIMITS.targetUrlLength;

interface FieldProblem {
  path: string;
  message: string;
}

/** Throws one `validation.invalid_input` listing every problem, each with the field it concerns. */
export function rejectIf(problems: FieldProblem[]): void {
  if (problems.length > 0) {
    throw new ApiError(
      'validation.invalid_input',
      problems.map((p) => `${p.path}: ${p.message}`).join('; '),
      {
        details: problems,
      },
    );
  }
}

/** A macro token as written in a target: `{name}`. */
const MACRO_TOKEN = /\{([^{}]*)\}/g;

/**
 * A target as a check outside any click sees it (`targets.check`): the macros a click would fill
 * — `{click_id}`, sub-ids, device, `{param:NAME}` and the rest — are empty, and only the flow, the
 * stream and a request id have values; each percent-encoded as on the hot path.
 */
export function targetWithoutClick(
  target: string,
  v: { flow: string; stream: string; request_id: string },
): string {
  return target.replace(MACRO_TOKEN, (_token, name: string) =>
    name === 'flow' || name === 'stream' || name === 'request_id' ? encodeURIComponent(v[name]) : '',
  );
}
/** Scheme and authority (user info, host, port) of a URL as the WHATWG parser splits a special one. */
const SCHEME_AND_AUTHORITY = /^[^:/?#\\]*:[/\\]*[^/?#\\]*/;
const MACRO_PLACES = 'macros may stand only in the path, query and fragment';

/**
 * The position of the first character a target URL must not hold, or -1: C0 controls and DEL
 * (the URL parser would silently drop tabs and newlines, and they cannot go into a header), C1
 * controls, and the line and paragraph separators U+2028/U+2029.
 */
function controlAt(url: string): number {
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x2028 || c === 0x2029) return i;
  }
  return -1;
}

/**
 * A target URL in the form it is stored and sent (docs/routing.md#target-urls): the WHATWG serialisation (IDN host in
 * punycode, non-ASCII and unsafe characters percent-encoded, scheme and host lower-cased) with
 * its macros kept exactly as `{name}`, so the result is plain visible ASCII that can always go
 * into a `Location` header. Or why it cannot be stored.
 *
 * The macros stand in for values only known per click, and the serialiser would percent-encode
 * their braces in a path. So each macro is swapped for an alphanumeric placeholder (which every
 * part of a URL keeps as it is), the URL is serialised, and the macros are put back. Macros are
 * refused before the path: a value chosen by the client (`{request_id}`) must never pick the host.
 */
export function normaliseTargetUrl(raw: string): { url: string } | { problem: string } {
  if (raw.length > MAX_URL) return { problem: `must be at most ${MAX_URL} characters` };
  const ctl = controlAt(raw);
  if (ctl !== -1) {
    const code = raw.charCodeAt(ctl).toString(16).toUpperCase().padStart(4, '0');
    return { problem: `must not contain control characters (U+${code} at character ${ctl + 1})` };
  }
  if (!raw.isWellFormed()) return { problem: 'must be well-formed Unicode (it holds a lone surrogate)' };
  const tokens = [...raw.matchAll(MACRO_TOKEN)];
  const unknown = tokens.find((m) => !isMacro(m[1]!));
  if (unknown !== undefined) {
    const allowed = `${MACROS.map((m) => `{${m}}`).join(', ')}, {param:NAME} (NAME: 1-64 of A-Z a-z 0-9 _ . -)`;
    return { problem: `unknown macro ${unknown[0]}; allowed: ${allowed}` };
  }
  if (/[{}]/.test(raw.replace(MACRO_TOKEN, ''))) return { problem: 'unbalanced { or }' };
  const authorityEnd = SCHEME_AND_AUTHORITY.exec(raw)?.[0].length ?? 0;
  const early = tokens.find((m) => m.index < authorityEnd);
  if (early !== undefined) {
    return { problem: `macro ${early[0]} stands in the scheme, user info, host or port; ${MACRO_PLACES}` };
  }

  // A placeholder tag the URL does not hold (case-insensitively: the host is lower-cased).
  let tag = 'sluicemacro';
  const lower = raw.toLowerCase();
  while (lower.includes(tag)) tag += 'x';
  let i = 0;
  const bare = raw.replace(MACRO_TOKEN, () => `${tag}${i++}${tag}`);
  let parsed: URL;
  try {
    parsed = new URL(bare);
  } catch {
    return { problem: 'must be an absolute http(s) URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return { problem: 'must use http or https' };
  if (parsed.username || parsed.password) return { problem: 'must not carry credentials' };
  const href = parsed.href;
  // Serialised as scheme://host[:port] + tail (path, query, fragment — an empty `?` or `#` kept,
  // which `search` and `hash` do not show); every placeholder must be in the tail, once.
  const origin = parsed.origin;
  const tail = href.slice(origin.length);
  if (!href.startsWith(origin) || origin.includes(tag)) {
    return { problem: `a macro stands before the path; ${MACRO_PLACES}` };
  }
  let url = tail;
  for (let n = 0; n < tokens.length; n++) {
    const placeholder = `${tag}${n}${tag}`;
    const at = url.indexOf(placeholder);
    if (at === -1 || url.indexOf(placeholder, at + 1) !== -1) {
      return { problem: `macro ${tokens[n]![0]} could not be kept in place; ${MACRO_PLACES}` };
    }
    url = url.slice(0, at) + tokens[n]![0] + url.slice(at + placeholder.length);
  }
  url = href.slice(0, href.length - tail.length) + url;
  if (url.length > MAX_URL) {
    return { problem: `must be at most ${MAX_URL} characters once normalised (${url.length})` };
  }
  // Already normalised (every row written through the ACP): keep the flat string it came in,
  // not the pieces the result was glued from; the routing cache holds one per stream.
  return { url: url === raw ? raw : url };
}

/**
 * A `target_url` field as it will be stored: its normalised form, or (with `url` empty) the
 * problem that keeps it from being stored, under its field's path.
 */
export function targetUrlField(raw: string, path = '/target_url'): { url: string; problems: FieldProblem[] } {
  const r = normaliseTargetUrl(raw);
  return 'problem' in r
    ? { url: '', problems: [{ path, message: r.problem }] }
    : { url: r.url, problems: [] };
}

export function countryListProblems(list: readonly string[] | undefined, path: string): FieldProblem[] {
  if (list === undefined) return [];
  return list.flatMap((c, i) =>
    isCountryCode(c.toUpperCase())
      ? []
      : [{ path: `${path}/${i}`, message: `"${c}" is not an ISO 3166-1 alpha-2 country code` }],
  );
}
