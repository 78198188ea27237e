import { ApiError } from '../errors/index.ts';

/** Macros a stream's target_url may hold (§8). */
export const MACROS = ['country', 'flow', 'stream', 'request_id'] as const;
export type Macro = (typeof MACROS)[number];

export const SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$';
export const SLUG = new RegExp(SLUG_PATTERN);
const MAX_URL = 2048;

const regionNames = new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });
/** Codes ICU names that are not assigned ISO 3166-1 countries, plus the "unknown" markers. */
const NOT_COUNTRIES = new Set(['ZZ', 'UK', 'EU', 'EZ', 'UN', 'QO', 'XX', 'T1', 'A1', 'A2', 'O1']);

/** True for an assigned ISO 3166-1 alpha-2 code, upper case. */
export function isCountryCode(code: string): boolean {
  if (!/^[A-Z]{2}$/.test(code) || NOT_COUNTRIES.has(code)) return false;
  try {
    return regionNames.of(code) !== undefined;
  } catch {
    return false;
  }
}

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

/** Problems with a target URL: absolute http(s), at most 2048 characters, only the documented macros. */
export function targetUrlProblems(url: string, path = '/target_url'): FieldProblem[] {
  if (url.length > MAX_URL) return [{ path, message: `must be at most ${MAX_URL} characters` }];
  const unknown = [...url.matchAll(/\{([^{}]*)\}/g)]
    .map((m) => m[1]!)
    .filter((m) => !(MACROS as readonly string[]).includes(m));
  if (unknown.length > 0) {
    return [
      { path, message: `unknown macro {${unknown[0]}}; allowed: ${MACROS.map((m) => `{${m}}`).join(', ')}` },
    ];
  }
  const bare = url.replace(/\{(country|flow|stream|request_id)\}/g, 'x');
  if (/[{}]/.test(bare)) return [{ path, message: 'unbalanced { or }' }];
  let parsed: URL;
  try {
    parsed = new URL(bare);
  } catch {
    return [{ path, message: 'must be an absolute http(s) URL' }];
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return [{ path, message: 'must use http or https' }];
  if (parsed.username || parsed.password) return [{ path, message: 'must not carry credentials' }];
  return [];
}

export function countryListProblems(list: readonly string[] | undefined, path: string): FieldProblem[] {
  if (list === undefined) return [];
  return list.flatMap((c, i) =>
    isCountryCode(c)
      ? []
      : [{ path: `${path}/${i}`, message: `"${c}" is not an ISO 3166-1 alpha-2 country code` }],
  );
}
