import { ApiError } from '../errors/index.ts';
import {
  CLICK_ID_PATTERN,
  CONVERSION_STATUSES,
  type ConversionStatus,
  isCurrency,
} from '../storage/index.ts';

/** A postback's values, checked: what a conversion is made of (docs/clicks.md#postbacks). */
export interface Postback {
  click_id: string;
  status: ConversionStatus;
  /** Payout in millionths of the currency unit: money is summed exactly, never as binary fractions. */
  payout_micros: number;
  /** ISO 4217, upper case. */
  currency: string;
  txid: string | null;
}

const CLICK_ID = new RegExp(CLICK_ID_PATTERN);
/**
 * A plain decimal: no sign, exponent, grouping or hex; six decimals at most (micro-units), and few
 * enough integer digits that the micro-unit integer stays exact in a double (below 2^53).
 */
const DECIMAL = /^(\d{1,9})(?:\.(\d{1,6}))?$/;
const TXID_MAX = 128;

/** What is wrong with one parameter, named as it is sent. */
interface Problem {
  param: string;
  message: string;
}

/**
 * One value per parameter: the first when repeated (query strings and forms may repeat a key),
 * undefined when absent. Objects and arrays of objects (a JSON body) are not values.
 */
function single(raw: unknown): string | number | boolean | undefined | null {
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  return null;
}

/**
 * A JSON `null` (or `[]`, or `[null]`) for a parameter: refused rather than read as absent, where a
 * default would stand in for it (`"status": null` was a sale). A network that means "none" leaves
 * the parameter out or sends it empty.
 */
function isNull(raw: unknown): boolean {
  return raw === null || (Array.isArray(raw) && (raw.length === 0 || raw[0] === null));
}

function text(raw: unknown, param: string, problems: Problem[]): string | undefined {
  if (isNull(raw)) {
    problems.push({ param, message: 'must not be null; leave it out (or send it empty) for its default' });
    return undefined;
  }
  const v = single(raw);
  if (v === undefined) return undefined;
  if (v === null || typeof v === 'boolean') {
    problems.push({ param, message: 'must be a string' });
    return undefined;
  }
  return String(v);
}

/**
 * A network's own names (`postback.aliases`, `postback.statuses`): another parameter name read as
 * one of the standard ones (docs/clicks.md#postbacks), another status value read as lead, sale or
 * rejected (either case).
 */
export interface PostbackDialect {
  aliases: Readonly<Record<string, string>>;
  statuses: Readonly<Record<string, ConversionStatus>>;
}

const PLAIN: PostbackDialect = { aliases: {}, statuses: {} };

/** The dialect of `postback.aliases` and `postback.statuses`, status values in lower case (they are read in any case). */
export function postbackDialect(cfg: {
  aliases: Readonly<Record<string, string>>;
  statuses: Readonly<Record<string, ConversionStatus>>;
}): PostbackDialect {
  return {
    aliases: cfg.aliases,
    statuses: Object.fromEntries(Object.entries(cfg.statuses).map(([k, v]) => [k.toLowerCase(), v])),
  };
}

/**
 * A parameter from the body when it names it, else from the query string; under one of its
 * aliases when neither names it (the first alias given, in the order the configuration lists them).
 */
function picker(query: unknown, body: unknown, dialect: PostbackDialect): (name: string) => unknown {
  const q = (typeof query === 'object' && query !== null ? query : {}) as Record<string, unknown>;
  const b = (typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}) as Record<
    string,
    unknown
  >;
  const own = (name: string) =>
    Object.hasOwn(b, name) ? b[name] : Object.hasOwn(q, name) ? q[name] : undefined;
  return (name) => {
    const v = own(name);
    if (v !== undefined) return v;
    for (const [alias, target] of Object.entries(dialect.aliases)) {
      if (target !== name) continue;
      const a = own(alias);
      if (a !== undefined) return a;
    }
    return undefined;
  };
}

/** The `key` parameter, read before anything else is judged: a caller without it learns nothing more. */
export function postbackKey(
  query: unknown,
  body: unknown,
  dialect: PostbackDialect = PLAIN,
): string | undefined {
  const v = single(picker(query, body, dialect)('key'));
  return typeof v === 'string' ? v : undefined;
}

/**
 * The postback's parameters from the query string merged with the body (the body wins where both
 * name a parameter), checked all at once: one `validation.invalid_input` lists every problem.
 */
export function parsePostback(query: unknown, body: unknown, dialect: PostbackDialect = PLAIN): Postback {
  const pick = picker(query, body, dialect);
  const problems: Problem[] = [];

  const clickId = text(pick('click_id'), 'click_id', problems);
  if (clickId === undefined || clickId === '') {
    if (!problems.some((p) => p.param === 'click_id'))
      problems.push({ param: 'click_id', message: 'is required' });
  } else if (!CLICK_ID.test(clickId)) {
    problems.push({ param: 'click_id', message: 'must be 1–64 characters of A–Z, a–z, 0–9, _ and -' });
  }

  const statusRaw = text(pick('status'), 'status', problems);
  const said = statusRaw === undefined || statusRaw === '' ? 'sale' : statusRaw.toLowerCase();
  const status = (Object.hasOwn(dialect.statuses, said) ? dialect.statuses[said] : said) as ConversionStatus;
  if (!CONVERSION_STATUSES.includes(status)) {
    const mapped = Object.keys(dialect.statuses);
    problems.push({
      param: 'status',
      message: `must be one of ${[...CONVERSION_STATUSES, ...mapped].join(', ')}${mapped.length === 0 ? " (postback.statuses maps a network's own values)" : ''}`,
    });
  }

  let payoutMicros = 0;
  const payoutRaw = text(pick('payout'), 'payout', problems);
  if (payoutRaw !== undefined && payoutRaw.trim() !== '') {
    const m = DECIMAL.exec(payoutRaw.trim());
    if (m === null) {
      problems.push({
        param: 'payout',
        message: 'must be a decimal number ≥ 0 with at most 9 integer digits and 6 decimals (e.g. 12.50)',
      });
    } else {
      payoutMicros = Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
    }
  }

  const currencyRaw = text(pick('currency'), 'currency', problems);
  // Any case, ASCII letters only: upper-casing `ıdr` (dotless i) would make it IDR.
  const currency =
    currencyRaw === undefined || currencyRaw === ''
      ? 'USD'
      : /^[A-Za-z]{3}$/.test(currencyRaw)
        ? currencyRaw.toUpperCase()
        : currencyRaw;
  if (!isCurrency(currency)) {
    problems.push({ param: 'currency', message: 'must be an ISO 4217 currency code (e.g. USD, EUR)' });
  }

  const txidRaw = text(pick('txid'), 'txid', problems);
  const txid = txidRaw === undefined || txidRaw === '' ? null : txidRaw;
  if (txid !== null) {
    if (txid.length > TXID_MAX)
      problems.push({ param: 'txid', message: `must be at most ${TXID_MAX} characters` });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    else if (/[\u0000-\u001f\u007f-\u009f]/.test(txid) || !txid.isWellFormed())
      problems.push({ param: 'txid', message: 'must not hold control characters or lone surrogates' });
  }

  if (problems.length > 0) {
    // `path` is a JSON pointer, as in every other endpoint's details (docs/errors.md), whether the
    // parameter came in the body or the query string.
    const details = problems.map((p) => ({ path: `/${p.param}`, message: p.message }));
    throw new ApiError('validation.invalid_input', details.map((d) => `${d.path}: ${d.message}`).join('; '), {
      details,
    });
  }
  return { click_id: clickId!, status, payout_micros: payoutMicros, currency, txid };
}
