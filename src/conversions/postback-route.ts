import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/index.ts';
import type { Clock } from '../time/index.ts';
import {
  type ConversionStatus,
  type Postback,
  parsePostback,
  postbackKey,
  postbackKeyAccepted,
} from './postback-params.ts';

/** Where a checked postback goes: the conversion it made or updated, or undefined for an unknown click. */
export interface ConversionSink {
  apply(postback: Postback, arrivedAt: string): Promise<{ conversion_id: string } | undefined>;
}

export interface PostbackRouteOptions {
  sink: ConversionSink;
  clock: Clock;
  /** `postback.key_sha256`: when set, every postback must carry the key whose SHA-256 this is. */
  keySha256: string | undefined;
}

export interface PostbackAnswer {
  ok: true;
  conversion_id: string;
  click_id: string;
  status: ConversionStatus;
}

/** A form body as an object of strings (a repeated key keeps every value, the parser takes the first). */
function parseForm(body: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null);
  for (const [k, v] of new URLSearchParams(body)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : [prev, v].flat();
  }
  return out;
}

/**
 * `GET|POST /postback` (§12): an affiliate network reports a conversion of a click. Parameters come
 * from the query string and from an urlencoded or JSON body; the same `(click_id, txid)` updates
 * one conversion. Errors are the contract's (400 values, 401 key, 404 click) with one record each.
 */
export function registerPostbackRoute(app: FastifyInstance, opts: PostbackRouteOptions): void {
  app.register((scope, _o, done) => {
    // Networks post forms as often as JSON; only this route takes them.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_request, body, parsed) => parsed(null, parseForm(body as string)),
    );
    const handler = async (request: { query: unknown; body?: unknown }): Promise<PostbackAnswer> => {
      if (!postbackKeyAccepted(opts.keySha256, postbackKey(request.query, request.body))) {
        throw new ApiError('auth.unauthorized', 'The postback key is missing or wrong.');
      }
      const postback = parsePostback(request.query, request.body);
      const arrivedAt = new Date(opts.clock.now()).toISOString();
      const applied = await opts.sink.apply(postback, arrivedAt);
      if (applied === undefined) throw new ApiError('resource.not_found', 'No click has that click_id.');
      return {
        ok: true,
        conversion_id: applied.conversion_id,
        click_id: postback.click_id,
        status: postback.status,
      };
    };
    scope.get('/postback', handler);
    scope.post('/postback', handler);
    done();
  });
}
