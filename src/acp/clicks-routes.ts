import { Type } from '@sinclair/typebox';
import { Text } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import { PAGE_LIMIT_DEFAULT, PageCursor, PageLimit } from '../routing/index.ts';
import {
  CLICK_ID_PATTERN,
  CLICK_OUTCOMES,
  type ClickRecord,
  type ClickStore,
  CONVERSION_STATUSES,
  type ConversionRecord,
  type ConversionStore,
  ID_PATTERN,
  SUB_ID_MAX_LENGTH,
} from '../storage/index.ts';
import type { Telemetry } from '../telemetry/index.ts';
import type { AcpRouter } from './acp-router.ts';

const lit = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)));
const strict = { additionalProperties: false } as const;
const Id = Type.String({ pattern: ID_PATTERN });
/**
 * An ISO-8601 date or date-time (`2026-01-02`, `2026-01-02T12:00Z`, `…T12:00:00.5+02:00`); taken
 * to the UTC millisecond form the log tables store before it is compared with them.
 */
export const Timestamp = Type.String({
  maxLength: 40,
  pattern: '^\\d{4}-\\d\\d-\\d\\d(T\\d\\d:\\d\\d(:\\d\\d(\\.\\d{1,9})?)?(Z|[+-]\\d\\d:\\d\\d))?$',
  description: 'ISO-8601 date or date-time with a zone (Z or ±hh:mm); from inclusive, to exclusive',
});

export const ClickGetBody = Type.Object({ click_id: Type.String({ pattern: CLICK_ID_PATTERN }) }, strict);
export const ClickListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object(
        {
          flow_id: Type.Optional(Id),
          stream_id: Type.Optional(Id),
          outcome: Type.Optional(lit(CLICK_OUTCOMES)),
          country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$' })),
          is_bot: Type.Optional(Type.Boolean()),
          from: Type.Optional(Timestamp),
          to: Type.Optional(Timestamp),
          sub1: Type.Optional(Text({ minLength: 1, maxLength: SUB_ID_MAX_LENGTH })),
        },
        strict,
      ),
    ),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(PageCursor),
  },
  strict,
);
export const ConversionListBody = Type.Object(
  {
    filter: Type.Optional(
      Type.Object(
        {
          flow_id: Type.Optional(Id),
          stream_id: Type.Optional(Id),
          status: Type.Optional(lit(CONVERSION_STATUSES)),
          from: Type.Optional(Timestamp),
          to: Type.Optional(Timestamp),
        },
        strict,
      ),
    ),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(PageCursor),
  },
  strict,
);

/** A click as `/acp/clicks/get` shows it: `pending` while it waits in this node's click log. */
export type ClickView = ClickRecord & { pending: boolean };

export interface ClickRoutesDeps {
  clicks: Pick<ClickStore, 'get' | 'list'>;
  conversions: Pick<ConversionStore, 'list' | 'ofClick'>;
  /** A click this node took that is not written yet (the click log's `find`). */
  pendingClick: (clickId: string) => ClickRecord | undefined;
  telemetry: Telemetry;
  commit: string;
}

/** `v` (a {@link Timestamp}) as stored, `…T…:…:….mmmZ`; undefined when that day does not exist. */
function storedTime(v: string): string | undefined {
  const [y, m, d] = [v.slice(0, 4), v.slice(5, 7), v.slice(8, 10)].map(Number) as [number, number, number];
  // Date.parse rolls 2026-02-30 over to 2 March: the calendar day is checked on its own.
  const day = new Date(Date.UTC(2000, m - 1, d));
  if (y < 1 || m < 1 || m > 12 || day.getUTCMonth() !== m - 1 || (m === 2 && d === 29 && !leap(y))) {
    return undefined;
  }
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}
const leap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** The filter with `from`/`to` as stored; a day that does not exist is refused, naming the field. */
export function range<F extends { from?: string | undefined; to?: string | undefined }>(
  filter: F | undefined,
): F {
  const f = { ...filter } as F;
  for (const name of ['from', 'to'] as const) {
    const v = f[name];
    if (v === undefined) continue;
    const stored = storedTime(v);
    if (stored === undefined) {
      const message = 'must be an existing date or date-time';
      throw new ApiError('validation.invalid_input', `/filter/${name}: ${message}`, {
        details: [{ path: `/filter/${name}`, message }],
      });
    }
    f[name] = stored as F[typeof name];
  }
  return f;
}

/**
 * The click log and conversions in the ACP (docs/clicks.md#acp), for any operator: a click with its
 * conversions, and the two newest-first lists, keyset-paged like the other lists, each with
 * `runtime` (its own recorder entry) and `commit`.
 */
export function registerClickRoutes(acp: AcpRouter, deps: ClickRoutesDeps): void {
  const { clicks, conversions, pendingClick, telemetry, commit } = deps;
  const listed = <T>(path: string, page: T) => ({
    ...page,
    runtime: telemetry.controllers.get(path).entry(),
    commit,
  });

  acp.add({
    path: '/acp/clicks/get',
    role: 'viewer',
    body: ClickGetBody,
    handler: async ({ body }): Promise<{ click: ClickView; conversions: ConversionRecord[] }> => {
      const stored = await clicks.get(body.click_id);
      // A click is written at most a flush interval late: until then this node still holds it.
      const click = stored ?? pendingClick(body.click_id);
      if (click === undefined) throw new ApiError('resource.not_found', 'No click has that click_id.');
      return {
        click: { ...click, pending: stored === undefined },
        conversions: await conversions.ofClick(body.click_id),
      };
    },
  });
  acp.add({
    path: '/acp/clicks/list',
    role: 'viewer',
    body: ClickListBody,
    handler: async ({ body }) =>
      listed(
        '/acp/clicks/list',
        await clicks.list({
          filter: range(body.filter),
          limit: body.limit ?? PAGE_LIMIT_DEFAULT,
          cursor: body.cursor,
        }),
      ),
  });
  acp.add({
    path: '/acp/conversions/list',
    role: 'viewer',
    body: ConversionListBody,
    handler: async ({ body }) =>
      listed(
        '/acp/conversions/list',
        await conversions.list({
          filter: range(body.filter),
          limit: body.limit ?? PAGE_LIMIT_DEFAULT,
          cursor: body.cursor,
        }),
      ),
  });
}
