import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthLimiter } from '../auth/index.ts';
import { clickIdTime } from '../clicks/index.ts';
import { ApiError, ERROR_CODES } from '../errors/index.ts';
import { toApiError } from '../http/index.ts';
import {
  type ClickRecord,
  type ConversionStatus,
  type ConversionStore,
  fromMicros,
} from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import type { PostbackKeys } from './postback-keys.ts';
import { type PostbackDialect, parsePostback, postbackKey } from './postback-params.ts';

export interface PostbackRouteOptions {
  conversions: ConversionStore;
  /** A click this node took that is not written yet (a postback can beat the click log's flush). */
  pendingClick: (clickId: string) => ClickRecord | undefined;
  /** Which keys are accepted, and whether one is needed at all. */
  keys: PostbackKeys;
  /** A network's own parameter names and status values (`postback.aliases`, `postback.statuses`). */
  dialect?: PostbackDialect;
  /** Wrong or missing keys count against the client address like failed ACP tokens. */
  limiter?: AuthLimiter | undefined;
  /**
   * How long after a click was made (the time in its id) a postback for it that finds no click
   * waits for one: another node took it and holds it until its click log is written (a second
   * more than that may take: `clicks.flush_interval_ms`, or a `clicks.flush` task's bound; see
   * tasks/clickWrites). 0: answer 404 at once.
   */
  recentClickWaitMs?: number;
  clock?: Clock;
}

/** How often a waiting postback looks for its click again. */
const RECENT_CLICK_POLL_MS = 200;
/** Clocks of two nodes may differ by this much: a click id made "later" than now is still recent. */
const CLOCK_SKEW_MS = 1000;
/**
 * Postbacks waiting for a click at once, at most (beyond, a 404 at once): each looks again five
 * times a second, so made-up recent ids cannot multiply the database's load without bound.
 */
const MAX_WAITING = 256;

export interface PostbackAnswer {
  ok: true;
  conversion_id: string;
  click_id: string;
  status: ConversionStatus;
}

/**
 * What a postback body may be (docs/clicks.md#postbacks), told to a client that sent something
 * else.
 */
const POSTBACK_MEDIA_MESSAGE =
  'The request body must be application/json or application/x-www-form-urlencoded.';

/** Form bodies are UTF-8, as JSON bodies are (src/http/server.ts): bad bytes are refused, not stored as U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const BODY = 'The request body';
const notUtf8 = (source: string, cause: unknown) =>
  new ApiError('validation.invalid_input', `${source} is not valid UTF-8.`, { cause });

/** A `%` that starts no escape: a form keeps it as it is (WHATWG), decodeURIComponent would throw. */
const LONE_PERCENT = /%(?![0-9A-Fa-f]{2})/g;
/**
 * One name or value of a form, `+` as a space; throws a URIError when its bytes are not UTF-8.
 * Most are plain (a click id, a payout): they are kept as they are, without three string copies.
 */
const decodeComponent = (part: string) =>
  part.indexOf('%') === -1 && part.indexOf('+') === -1
    ? part
    : decodeURIComponent(part.replaceAll('+', ' ').replace(LONE_PERCENT, '%25'));

/**
 * An `application/x-www-form-urlencoded` string (a form body, a query string) as an object of
 * strings (a repeated key keeps every value; the parser takes the first). Split and decoded as
 * URLSearchParams does, but a `%`-escape that decodes to bytes that are not UTF-8 is refused
 * rather than turned into U+FFFD: `txid=%FF` and `txid=%FE` would otherwise be one conversion.
 * `source` names the input in the refusal.
 */
function parseForm(text: string, source: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null);
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    let k: string;
    let v: string;
    try {
      k = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
      v = eq === -1 ? '' : decodeComponent(pair.slice(eq + 1));
    } catch (err) {
      throw notUtf8(source, err);
    }
    const prev = out[k];
    out[k] = prev === undefined ? v : [prev, v].flat();
  }
  return out;
}

/**
 * `GET|POST /postback` (docs/clicks.md#postbacks): an affiliate network reports a conversion of a
 * click. Parameters come from the query string and from an urlencoded or JSON body; the same
 * `(click_id, txid)` updates one conversion. Once the query string and the body are decoded (400
 * when they are not UTF-8), the key is judged before anything else (401, or 429 for an address over
 * the failed-authentication limit), then the values (400), then the click (404); each error is the
 * contract's, with its one `api error` record.
 */
export function registerPostbackRoute(app: FastifyInstance, opts: PostbackRouteOptions): void {
  const waits = new ClickWaits(opts.recentClickWaitMs ?? 0, opts.clock);
  // A stopping node answers its waiting postbacks at once, before its storage closes.
  app.addHook('preClose', (done) => {
    waits.stop();
    done();
  });
  app.register((scope, _o, done) => {
    // Networks post forms as often as JSON; only this route takes them.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'buffer' },
      (_request, raw, parsed) => {
        let form: Record<string, string | string[]>;
        try {
          form = parseForm(utf8.decode(raw as Buffer), BODY);
        } catch (err) {
          parsed(err instanceof ApiError ? err : notUtf8(BODY, err), undefined);
          return;
        }
        parsed(null, form);
      },
    );
    // The registry's 415 message names JSON alone, which is all the other routes take; here it
    // names both. A thrown error goes on to the server's handler, which answers and records it.
    // Anything else goes on as thrown: the server's handler tells a client that left mid-body
    // (no answer, no record) from a real error, which a mapped error would hide (a 400 record).
    scope.setErrorHandler((err) => {
      const api = toApiError(err);
      // Only the registry's media-type refusal names JSON alone (a compressed body has its own).
      if (api.code !== 'request.unsupported_media_type' || api.message !== ERROR_CODES[api.code].message)
        throw err;
      throw new ApiError(api.code, POSTBACK_MEDIA_MESSAGE, { cause: err });
    });
    const handler = async (request: FastifyRequest): Promise<PostbackAnswer> => {
      // Read here rather than taken from fastify's parser, which keeps an escape that is not
      // UTF-8 undecoded (`%FF` and `%25FF` both give "%FF"): the same rules as a form body.
      const q = request.url.indexOf('?');
      const query = q === -1 ? {} : parseForm(request.url.slice(q + 1), 'The query string');
      const limiter = opts.limiter;
      // A locked-out address is refused whatever key it sends (a right one answered 200 would tell
      // a guesser which it was), unless it has sent this same key, right, from there before.
      const key = postbackKey(query, request.body, opts.dialect) ?? '';
      if (limiter !== undefined && !limiter.proven(request.ip, key)) limiter.check(request.ip);
      if (!(await opts.keys.accepts(key === '' ? undefined : key))) {
        limiter?.failed(request.ip);
        throw new ApiError('auth.unauthorized', 'The postback key is missing or wrong.');
      }
      if (opts.keys.required) limiter?.prove(request.ip, key);
      const pb = parsePostback(query, request.body, opts.dialect);
      const apply = () =>
        opts.conversions.upsert(
          {
            click_id: pb.click_id,
            txid: pb.txid,
            status: pb.status,
            payout: fromMicros(pb.payout_micros),
            currency: pb.currency,
          },
          opts.pendingClick(pb.click_id),
        );
      // Postbacks of one conversion are applied in the order this node got them, also when the
      // first waits for its click (a later `rejected` must not be overwritten by an earlier `lead`).
      const peer = peerOf(request.raw.socket);
      return waits.inOrder(`${pb.click_id}\u0000${pb.txid ?? ''}`, async () => {
        const applied = (await apply()) ?? (await waits.forClick(pb.click_id, peer, apply));
        // A stopping node cannot wait for a click another node may yet write: a 503 is retried by
        // networks, a 404 often never.
        if (applied === undefined)
          throw waits.stopping
            ? new ApiError('node.stopping')
            : new ApiError('resource.not_found', 'No click has that click_id.');
        return {
          ok: true,
          conversion_id: applied.conversion.conversion_id,
          click_id: pb.click_id,
          status: pb.status,
        };
      });
    };
    // GET and POST only (docs/clicks.md#postbacks): a HEAD from a link checker must not record a
    // conversion.
    scope.get('/postback', { exposeHeadRoute: false }, handler);
    scope.post('/postback', handler);
    done();
  });
}

const noop = () => {};

/**
 * A click made moments ago on another node is in that node's buffer until its flush: a postback for
 * it (behind a load balancer any node gets it) waits for the click rather than answering a 404 a
 * network may never retry. The wait is bounded by the time in the click id (a made-up id waits no
 * longer than a real one could), by {@link MAX_WAITING} postbacks at once whose clients are still
 * connected (and as many more whose clients half-closed), by the client (a closed connection ends
 * its wait) and by the node's stop (a stopping node answers at once, then closes its storage).
 * Postbacks of one conversion are applied in the order they arrived; one queued behind another
 * holds no place until its turn.
 */
class ClickWaits {
  readonly #windowMs: number;
  readonly #clock: Clock | undefined;
  readonly #stopping = new AbortController();
  readonly #chains = new Map<string, Promise<void>>();
  /** Postbacks waiting whose client is still connected, and those whose client half-closed. */
  #waiting = 0;
  #halfClosed = 0;

  constructor(windowMs: number, clock: Clock | undefined) {
    this.#windowMs = windowMs;
    this.#clock = clock;
  }

  /** The node is stopping: a wait was, or would have been, cut short. */
  get stopping(): boolean {
    return this.#stopping.signal.aborted;
  }

  stop(): void {
    this.#stopping.abort();
  }

  /** Runs `work` once every earlier call for the same key on this node has settled. */
  inOrder<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.#chains.get(key);
    const run = before === undefined ? work() : before.then(work);
    const tail = run.then(noop, noop);
    this.#chains.set(key, tail);
    void tail.then(() => {
      if (this.#chains.get(key) === tail) this.#chains.delete(key);
    });
    return run;
  }

  /**
   * `look()` again every {@link RECENT_CLICK_POLL_MS} until it finds the click or the wait ends: the
   * window closes, the node stops, or the client's connection closes. A client that half-closes
   * (sends FIN after its request) may still read its answer (the server allows half-open
   * connections) or may be gone: it keeps waiting, but among the half-closed, capped apart, so
   * that clients that left cannot hold the places of those still there.
   */
  async forClick<T>(clickId: string, peer: Peer, look: () => Promise<T | undefined>): Promise<T | undefined> {
    const made = clickIdTime(clickId);
    if (made === undefined || this.#clock === undefined || this.#windowMs <= 0) return undefined;
    if (this.#stopping.signal.aborted || peer.closed.signal.aborted) return undefined;
    const now = this.#clock.now();
    const remaining = made + this.#windowMs - now;
    if (made > now + CLOCK_SKEW_MS || remaining <= 0) return undefined;
    let held: 'open' | 'half' | undefined = peer.ended.signal.aborted ? 'half' : 'open';
    if (!this.#take(held)) return undefined;
    const whileOpen = AbortSignal.any([this.#stopping.signal, peer.closed.signal, peer.ended.signal]);
    const whileHalf = AbortSignal.any([this.#stopping.signal, peer.closed.signal]);
    // Real time, not the injected clock: this is how long a request is held.
    const until = performance.now() + remaining;
    try {
      while (performance.now() < until) {
        try {
          await sleep(Math.min(RECENT_CLICK_POLL_MS, until - performance.now()), undefined, {
            signal: held === 'open' ? whileOpen : whileHalf,
          });
        } catch {
          if (this.#stopping.signal.aborted || peer.closed.signal.aborted) return undefined;
          this.#release(held);
          held = this.#take('half') ? 'half' : undefined;
          if (held === undefined) return undefined;
          continue;
        }
        const found = await look();
        if (found !== undefined) return found;
      }
      return undefined;
    } finally {
      this.#release(held);
    }
  }

  #take(kind: 'open' | 'half'): boolean {
    if (kind === 'open') {
      if (this.#waiting >= MAX_WAITING) return false;
      this.#waiting++;
    } else {
      if (this.#halfClosed >= MAX_WAITING) return false;
      this.#halfClosed++;
    }
    return true;
  }

  #release(kind: 'open' | 'half' | undefined): void {
    if (kind === 'open') this.#waiting--;
    else if (kind === 'half') this.#halfClosed--;
  }
}

/** A client's connection as the waits see it: closed (gone), or ended (half-closed: FIN sent). */
interface Peer {
  closed: AbortController;
  ended: AbortController;
}

const peers = new WeakMap<Socket, Peer>();

/**
 * The connection a request came on, watched once for its whole life (a keep-alive connection
 * carries many postbacks: one pair of listeners, however many of them wait), from the request's
 * arrival, so a client that left while its postback was queued is known to be gone.
 */
function peerOf(socket: Socket): Peer {
  let peer = peers.get(socket);
  if (peer === undefined) {
    const p: Peer = { closed: new AbortController(), ended: new AbortController() };
    if (socket.destroyed) p.closed.abort();
    if (socket.readableEnded) p.ended.abort();
    socket.once('close', () => p.closed.abort());
    socket.once('end', () => p.ended.abort());
    peers.set(socket, p);
    peer = p;
  }
  return peer;
}
