import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../errors/index.ts';
import { type Logger, outcomeOf, type Recorder, unredacted } from '../telemetry/index.ts';
import { describeApiError, errorHeaders } from './error-reply.ts';
import { type CountryResolver, requestIdFrom } from './request-context.ts';

/**
 * What a request's answer starts from: its id, its country (the `X-Client-Country-Code` of
 * docs/telemetry.md) and its client, decided once.
 */
export interface RequestTrace {
  id: string;
  country: string | undefined;
  /** The client's address after trusted proxies (as fastify's `request.ip`); undefined when unknown. */
  client: string | undefined;
}

/** An answer with no body: its status and the headers after the tracing ones, in order. */
export interface FastAnswer {
  status: number;
  headers: Record<string, string>;
  /** A small body (a redirect page); none: an empty answer. */
  body?: string;
}

/**
 * A route that may answer a plain `GET` straight from Node's request, before fastify sees it
 * (see {@link FrontDoor}). It answers only what it can answer at once, with no I/O (a cache hit,
 * or a 404 decided from the cache); for anything else it returns undefined and fastify answers the
 * request as if the fast path did not exist.
 */
export interface FastRoute {
  /** The path prefix it serves, e.g. `/go/`; the rest of the path, up to `?`, is its one parameter. */
  prefix: string;
  /** Its fastify path, which names its recorder, e.g. `/go/:slug`. */
  path: string;
  /**
   * The answer: a response, a contract error (answered and logged as fastify's error path does),
   * or undefined to hand the request to fastify. Must not throw.
   */
  answer(param: string, trace: RequestTrace, req: IncomingMessage): FastAnswer | ApiError | undefined;
}

/** The server options fastify hands a `serverFactory`, as it would have used them itself. */
export interface FactoryOptions {
  http?: ServerOptions;
  /** The largest body fastify reads (`bodyLimit`), by which `Expect: 100-continue` is answered. */
  bodyLimit?: number;
  keepAliveTimeout?: number;
  requestTimeout?: number;
  connectionTimeout?: number;
  maxRequestsPerSocket?: number;
}

/**
 * A request pipelined behind one whose answer is not yet sent (Node queues its response without a
 * socket) is taken up when that answer has gone, as nginx reads the next request only after it
 * answered the one before. An answer that closes the connection (a body that could not be read,
 * a refused head) then leaves the requests behind it undone: Node would have run them, written
 * what they changed and logged their errors, and thrown their answers away with the connection.
 * Such a response never gets its socket, and the waiting request goes with it (nothing else holds
 * it); one parsed after that answer went finds the connection's writing side ended, and is dropped.
 * Two property reads per request on the hot path; a client that does not pipeline never waits.
 */
function waitForTurn(
  req: IncomingMessage,
  res: ServerResponse,
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  const socket = req.socket;
  if (socket.destroyed) return;
  // Node stops reading a connection only when answers pile up unsent; waiting requests write
  // nothing, so a client could queue hundreds of thousands behind one slow answer (a waiting
  // postback) and freeze the node clearing them. No real client pipelines this deep.
  const waiting = (waitingOn.get(socket) ?? 0) + 1;
  if (waiting > MAX_WAITING) {
    socket.destroy();
    return;
  }
  waitingOn.set(socket, waiting);
  res.once('socket', () => {
    waitingOn.set(socket, (waitingOn.get(socket) ?? 1) - 1);
    handle(req, res);
  });
}

/**
 * Serves a request when its turn on the connection comes (see {@link waitForTurn}); one parsed
 * after an answer that ended the connection is dropped: nothing could answer it, so nothing runs.
 * Every request the server takes goes through here, the ones Node's own events hand over too.
 */
export function inTurn(
  req: IncomingMessage,
  res: ServerResponse,
  serve: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  const socket = res.socket;
  if (socket === null) waitForTurn(req, res, (rq, rs) => inTurn(rq, rs, serve));
  else if (!socket.writableEnded) serve(req, res);
}

/** Requests one connection may have waiting for their turn; one more closes the connection. */
export const MAX_WAITING = 64;
const waitingOn = new WeakMap<Socket, number>();

const kTrace = Symbol('sluice.trace');
type Traced = IncomingMessage & { [kTrace]?: RequestTrace };

/**
 * The request id fastify gives a request (its `genReqId`): the one the fast path already chose when
 * it looked at the request and handed it over, so a request has one id whichever path answers it.
 */
export function requestIdOf(req: IncomingMessage): string {
  return (req as Traced)[kTrace]?.id ?? requestIdFrom(req);
}

/**
 * The HTTP server under fastify, with a front door: each request is first offered to the fast
 * routes, and only the ones they do not answer reach fastify's handler. A fast answer is written
 * with one `writeHead` carrying exactly the headers fastify's reply would carry (the tracing ones,
 * the route's, `content-length: 0`), and is counted by the route's own recorder, so an operator
 * cannot tell which path answered (test/http/fast-path.test.ts compares the two byte for byte).
 *
 * Handed to fastify untouched: every method but `GET`, a request with a body or an `Expect`, no
 * `Host`, a path outside a fast prefix or with anything fastify would decode or re-route (only a
 * plain parameter followed by `?` or nothing is taken), and every request once the server is
 * closing (fastify then adds `Connection: close`).
 */
export class FrontDoor {
  readonly #routes: { route: FastRoute; recorder: Recorder | undefined }[] = [];
  readonly #serverId: string;
  readonly #country: CountryResolver;
  readonly #recorder: (path: string) => Recorder | undefined;
  readonly #logger: Logger;
  /** {@link unredacted}: for the records made only of strings and numbers under fixed keys. */
  readonly #plainLogger: Logger;
  readonly #enabled: boolean;
  #closing = false;

  constructor(deps: {
    /** False: every request goes to fastify (the comparison test and benchmark). */
    enabled: boolean;
    serverId: string;
    country: CountryResolver;
    /** The recorder of a route path; undefined when routes are not recorded. */
    recorder: (path: string) => Recorder | undefined;
    /** Where an error answer's one `api error` record goes, as fastify's request logger would write it. */
    logger: Logger;
  }) {
    this.#enabled = deps.enabled;
    this.#logger = deps.logger;
    this.#plainLogger = unredacted(deps.logger);
    this.#serverId = deps.serverId;
    this.#country = deps.country;
    this.#recorder = deps.recorder;
  }

  add(route: FastRoute): void {
    if (this.#enabled) this.#routes.push({ route, recorder: this.#recorder(route.path) });
  }

  /** From fastify's `preClose`: from then on fastify answers everything (and closes connections). */
  closing(): void {
    this.#closing = true;
  }

  /** fastify's `serverFactory`: the server fastify would have made, with the front door in it. */
  server(fastify: (req: IncomingMessage, res: ServerResponse) => void, opts: FactoryOptions): Server {
    const dispatch = (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'GET' || this.#closing || !this.#answer(req, res)) fastify(req, res);
    };
    const handle = (req: IncomingMessage, res: ServerResponse) => inTurn(req, res, dispatch);
    // `opts.http` carries Node's `optimizeEmptyRequests` (see createServer and its preParsing hook).
    const server = createHttpServer(opts.http ?? {}, handle);
    // `Expect: 100-continue` (with this listener Node no longer sends `100 Continue` itself): a body
    // over the limit is not asked for; fastify then refuses it by its Content-Length with the usual
    // 413, and Node closes the connection after an answer sent without `100 Continue`.
    const bodyLimit = opts.bodyLimit ?? Number.POSITIVE_INFINITY;
    server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      if (Number(req.headers['content-length'] ?? 0) <= bodyLimit) res.writeContinue();
      handle(req, res);
    });
    // As fastify's own getServerInstance sets them.
    if (opts.keepAliveTimeout !== undefined) server.keepAliveTimeout = opts.keepAliveTimeout;
    if (opts.requestTimeout !== undefined) server.requestTimeout = opts.requestTimeout;
    if (opts.connectionTimeout !== undefined) server.setTimeout(opts.connectionTimeout);
    if (opts.maxRequestsPerSocket !== undefined && opts.maxRequestsPerSocket > 0)
      server.maxRequestsPerSocket = opts.maxRequestsPerSocket;
    // A client that half-closes after its request (`printf ... | nc`) still gets its answer, as
    // nginx gives it: Node otherwise ends the socket on the FIN, and every answer that needed a
    // database round trip (a cache miss, an ACP call on PostgreSQL) was never sent. Node's own
    // server property (set false by its constructor): the connection closes after the answer.
    (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    return server;
  }

  #answer(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url!;
    const routes = this.#routes;
    for (let i = 0; i < routes.length; i++) {
      const { route, recorder } = routes[i]!;
      if (!url.startsWith(route.prefix)) continue;
      const start = performance.now();
      const h = req.headers;
      if (
        h.host === undefined ||
        h['content-length'] !== undefined ||
        h['transfer-encoding'] !== undefined ||
        h.expect !== undefined
      )
        return false;
      const q = url.indexOf('?', route.prefix.length);
      const param = url.slice(route.prefix.length, q === -1 ? url.length : q);
      // The header reports what a trusted proxy said (docs/telemetry.md); the click goes by that, else by address.
      const said = this.#country.fromHeader(req);
      const client = this.#country.clientAddress(req);
      const trace: RequestTrace = {
        id: requestIdFrom(req),
        country: said ?? this.#country.byAddress(client),
        client,
      };
      let answer: FastAnswer | ApiError | undefined;
      try {
        answer = route.answer(param, trace, req);
      } catch {
        // A route's bug must not take the connection down: fastify answers (and reports) it.
        answer = undefined;
      }
      if (answer === undefined) {
        (req as Traced)[kTrace] = trace;
        return false;
      }
      // The headers in the order fastify's reply writes them: onRequest's, the route's, then its own.
      const headers: Record<string, string> = { 'x-request-id': trace.id, 'x-server-id': this.#serverId };
      if (said !== undefined) headers['x-client-country-code'] = said;
      let status: number;
      let body: string | undefined;
      if (answer instanceof ApiError) {
        // As the error path's sendApiError: the contract body and its one `api error` record.
        const described = describeApiError(answer, trace.id);
        // Without details the record is code, status and strings: nothing redaction would change.
        const log = answer.details === undefined ? this.#plainLogger : this.#logger;
        log.error({ ...described.record, request_id: trace.id, trace_id: trace.id }, 'api error');
        const extra = errorHeaders(answer);
        for (const name in extra) headers[name] = extra[name]!;
        headers['content-type'] = 'application/json; charset=utf-8';
        status = answer.status;
        body = JSON.stringify(described.body);
      } else {
        const extra = answer.headers;
        for (const name in extra) headers[name] = extra[name]!;
        status = answer.status;
        body = answer.body;
      }
      headers['content-length'] = body === undefined ? '0' : String(Buffer.byteLength(body));
      res.writeHead(status, headers).end(body);
      recorder?.record(performance.now() - start, outcomeOf(status));
      return true;
    }
    return false;
  }
}
