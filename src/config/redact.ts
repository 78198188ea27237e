import type { TSchema } from '@sinclair/typebox';
import { type Config, ConfigSchema } from './schema.ts';

export const REDACTED = '[redacted]';

/** Header names whose values are never shown, whatever the configuration says. */
export const ALWAYS_REDACTED_HEADERS: readonly string[] = [
  'authorization',
  'cookie',
  'set-cookie',
  'proxy-authorization',
];

/**
 * Query (and fragment) parameter names whose values are never shown, whatever the configuration
 * says, on top of `http_client.secret_query_params`: any name (lower-cased) that contains one of
 * these (`client_secret`, `private_token`, `x-api-key`, `X-Amz-Signature`…). Exact names alone let
 * every spelling the list did not foresee through.
 */
export const ALWAYS_SECRET_PARAM = /token|secret|passw(?:or)?d|api[-_]?key|signature/;

/** What may be shown of a configuration value: nothing (`true`), or a URL without its secrets. */
type SecretKind = true | 'url';

/**
 * The one rule for showing anything that may hold a secret, used by every view: the configuration
 * (`POST /acp/system/config`), task errors (the task list, system metrics, the log, the run
 * journal), outgoing-call captures (the log, recent failures, hence the console and doctor), and a
 * refused configuration's message. A secret becomes `[redacted]`, the same marker everywhere:
 *
 * - in a URL: the userinfo, and the value of each query or fragment parameter named in
 *   `http_client.secret_query_params` or matching {@link ALWAYS_SECRET_PARAM} (case-insensitive);
 *   the rest stays as written;
 * - in headers: Authorization, Cookie, Set-Cookie, Proxy-Authorization, those named in
 *   `http_client.redact_headers`, and a call's own secret headers (an `http.probe` task's);
 * - in free text (an error message): every URL in it, as above;
 * - in the configuration: a value under a `secret: true` schema node, and the secret parts of a
 *   URL under a `secret: 'url'` node (an `http.probe` task's `url`).
 */
export class Redactor {
  readonly #params: ReadonlySet<string>;
  readonly #headers: ReadonlySet<string>;

  constructor(opts: { secretQueryParams: readonly string[]; secretHeaders?: readonly string[] }) {
    this.#params = new Set(opts.secretQueryParams.map((p) => p.toLowerCase()));
    this.#headers = new Set([...ALWAYS_REDACTED_HEADERS, ...(opts.secretHeaders ?? [])].map(lower));
  }

  /** The rule of a node's configuration (`http_client.secret_query_params`, `redact_headers`). */
  static of(config: Config): Redactor {
    return new Redactor({
      secretQueryParams: config.http_client.secret_query_params,
      secretHeaders: config.http_client.redact_headers,
    });
  }

  /** The URL as it may be shown; one that does not parse is not shown at all. */
  url(url: string): string {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return '[invalid url]';
    }
    // Rebuilt by hand: URL setters would percent-encode the marker, and URLSearchParams would
    // re-encode every other parameter.
    const userinfo = u.username || u.password ? `${REDACTED}@` : '';
    const authority = u.host === '' && !url.startsWith(`${u.protocol}//`) ? '' : `//${userinfo}${u.host}`;
    return `${u.protocol}${authority}${u.pathname}${this.#maskParams(u.search, '?')}${this.#maskParams(u.hash, '#')}`;
  }

  /** `?a=1&token=x` → `?a=1&token=[redacted]` (same for a `#…` fragment). */
  #maskParams(part: string, lead: '?' | '#'): string {
    if (part.length <= 1) return part;
    const pairs = part.slice(1).split('&');
    let changed = false;
    for (let i = 0; i < pairs.length; i++) {
      const pair = pairs[i]!;
      const eq = pair.indexOf('=');
      if (eq < 0) continue;
      const name = pair.slice(0, eq);
      const plain = decodeName(name).toLowerCase();
      if (this.#params.has(plain) || ALWAYS_SECRET_PARAM.test(plain)) {
        pairs[i] = `${name}=${REDACTED}`;
        changed = true;
      }
    }
    return changed ? `${lead}${pairs.join('&')}` : part;
  }

  /** Headers as they may be shown; `secret` names more secret headers for this one call. */
  headers(headers: Record<string, string>, secret?: readonly string[]): Record<string, string> {
    const extra = secret?.length ? new Set(secret.map(lower)) : undefined;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(headers)) {
      const name = k.toLowerCase();
      out[k] = this.#headers.has(name) || extra?.has(name) ? REDACTED : v;
    }
    return out;
  }

  /** Free text as it may be shown: every absolute URL in it masked as {@link url} does. */
  text(text: string): string {
    if (!text.includes('://')) return text;
    return text.replace(URL_IN_TEXT, (found) => {
      // Sentence punctuation after a URL is not part of it (a closing `]` may be: `[redacted]`).
      const tail = /[.,;:!?)'"]+$/.exec(found)?.[0] ?? '';
      const url = found.slice(0, found.length - tail.length);
      return `${this.url(url)}${tail}`;
    });
  }

  /** A copy of the configuration as it may be shown; the one the node runs with is untouched. */
  config(config: Config): Config {
    return this.#walk(ConfigSchema, config) as Config;
  }

  #walk(schema: TSchema | undefined, value: unknown): unknown {
    if (value === undefined || value === null) return value;
    const secret = schema?.secret as SecretKind | undefined;
    if (secret === 'url' && typeof value === 'string') return this.url(value);
    if (secret === true) {
      if (typeof value === 'object' && !Array.isArray(value)) {
        return Object.fromEntries(Object.keys(value).map((k) => [k, REDACTED]));
      }
      return REDACTED;
    }
    if (Array.isArray(value)) return value.map((v) => this.#walk(schema?.items, v));
    if (typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.#walk(childSchema(schema, k), v);
      return out;
    }
    return value;
  }
}

/** A copy of the configuration with its secrets redacted by the node's own rule ({@link Redactor}). */
export function redactConfig(config: Config): Config {
  return Redactor.of(config).config(config);
}

/**
 * Whether the configuration key at a JSON pointer (`/cron/tasks/p/headers/x-api-key`) holds a
 * secret, or lies under one: its value is then never quoted, not even in a refusal.
 */
export function isSecretKey(pointer: string): boolean {
  let schema: TSchema | undefined = ConfigSchema;
  for (const key of pointer.split('/').slice(1)) {
    if (schema === undefined || schema.secret !== undefined) break;
    schema = Array.isArray(schema.items) ? undefined : (schema.items ?? childSchema(schema, key));
  }
  return schema?.secret !== undefined;
}

function childSchema(schema: TSchema | undefined, key: string): TSchema | undefined {
  return (schema?.properties?.[key] ??
    (schema?.patternProperties ? Object.values(schema.patternProperties)[0] : undefined)) as
    | TSchema
    | undefined;
}

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi;
const lower = (s: string) => s.toLowerCase();

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' '));
  } catch {
    return name;
  }
}
