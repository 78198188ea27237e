import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
} from 'fastify';
import type { Config } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import {
  LazyRequestLogger,
  type Logger,
  outcomeOf,
  type Telemetry,
  UNMATCHED_ROUTE,
} from '../telemetry/index.ts';
import { trackConnections } from './drain.ts';
import { MAX_SCHEMA_PROBLEMS, sendApiError, setTracingHeaders } from './error-reply.ts';
import { type FactoryOptions, type FastRoute, FrontDoor, requestIdOf } from './fast-path.ts';
import type { GeoCountry } from './geo-country.ts';
import { registerJsonBody } from './json-body.ts';
import { Refusals } from './refusals.ts';
import { CountryResolver } from './request-context.ts';
import { registerRouteTable } from './route-table.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Upper-case ISO country of the client as a trusted proxy's header says it: `X-Client-Country-Code` (docs/telemetry.md#headers-every-response-2xx-3xx-404-errors-metrics). */
    headerCountry: string | undefined;
    /**
     * The country a click is routed and logged by (docs/routing.md#country): the header's, else the country database's
     * by the client's address; worked out when asked (by /go only).
     */
    readonly country: string | undefined;
    /** The client's address after trusted proxies (CountryResolver.clientAddress); undefined when unknown. */
    readonly clientAddress: string | undefined;
  }
}

/**
 * What a request's head says that Sluice does not serve, before any route: an HTTP/1.1 request
 * without `Host` (RFC 9112 §3.2), a body in a transfer coding other than plain `chunked` (Node's
 * parser takes `gzip, chunked` as chunked and would hand over the gzip bytes as the body) or in a
 * content coding (`Content-Encoding: gzip`: nothing here decodes one, RFC 9110 §8.4.1 answers 415).
 */
function framingProblem(req: IncomingMessage): ApiError | undefined {
  const h = req.headers;
  if (h.host === undefined && req.httpVersion === '1.1')
    return new ApiError('validation.invalid_input', 'An HTTP/1.1 request needs a Host header.');
  const te = h['transfer-encoding'];
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked')
    return new ApiError('validation.invalid_input', 'A request body may only be sent plain or chunked.');
  // A list (two headers arrive joined by commas); `identity` and empty entries code nothing.
  const coded = h['content-encoding']
    ?.split(',')
    .some((c) => !['', 'identity'].includes(c.trim().toLowerCase()));
  // Node has checked Content-Length is digits (00 and 0 are both no body).
  const body = te !== undefined || Number(h['content-length'] ?? 0) > 0;
  if (coded === true && body)
    return new ApiError(
      'request.unsupported_media_type',
      'A request body must not be compressed (Content-Encoding).',
    );
  return undefined;
}

export interface ServerDeps {
  config: Config;
  logger: Logger;
  telemetry: Telemetry;
  serverId: string;
  /**
   * Per-route recording (default true). Off only for the benchmark that measures what recording
   * costs; the tracing headers stay either way (they are the contract).
   */
  instrument?: boolean;
  /**
   * Answer cache hits of fast routes before fastify (default true). Off only for the test and the
   * benchmark that compare the two paths.
   */
  fastPath?: boolean;
  /** The country database for clients without a trusted country header (docs/routing.md#country); none: header only. */
  geo?: GeoCountry;
}

/**
 * Every problem of a body at once (a form is fixed in one go, not one field a save), and the
 * failing schema with each, so a pattern says what it means rather than quoting itself.
 */
const AJV_OPTIONS = {
  removeAdditional: false,
  coerceTypes: false,
  useDefaults: true,
  allErrors: true,
  verbose: true,
} as const;

/**
 * fastify's own formatter joined every problem into the error's message, which the `api error`
 * record logs: with every problem reported, a 1 MB body of bad items made a 27 MB record. At most
 * {@link MAX_SCHEMA_PROBLEMS} are kept.
 */
const schemaErrorFormatter: FastifyServerOptions['schemaErrorFormatter'] = (errors, dataVar) => {
  const shown = errors.slice(0, MAX_SCHEMA_PROBLEMS);
  const more = errors.length - shown.length;
  const text = shown.map((e) => `${dataVar}${e.instancePath} ${e.message ?? 'invalid'}`).join(', ');
  const err = new Error(more > 0 ? `${text} (and ${more} more)` : text) as Error & { validation: unknown };
  err.validation = shown;
  return err;
};

const frontDoors = new WeakMap<FastifyInstance, FrontDoor>();

/**
 * Lets a route answer what it can at once straight from Node's request, before fastify (see
 * {@link FrontDoor}); the route must also be registered with fastify, which answers the rest.
 */
export function addFastRoute(app: FastifyInstance, route: FastRoute): void {
  const front = frontDoors.get(app);
  if (front === undefined) throw new Error('addFastRoute: the app was not made by createServer');
  front.add(route);
}

/**
 * The fastify instance with everything every route shares: tracing headers on every response,
 * per-route recorders and the 404/405 table (route-table.ts), the JSON body rules (json-body.ts),
 * and the single error path. Routes are added by the
 * capabilities (ACP, routing, health) before `listen`.
 */
export function createServer(deps: ServerDeps): FastifyInstance {
  const { config, logger, telemetry, serverId } = deps;
  const country = new CountryResolver(
    config.app.server.country_header,
    config.app.server.trusted_proxies,
    deps.geo,
  );
  const unmatched = telemetry.controllers.get(UNMATCHED_ROUTE);
  const refusals = new Refusals({ logger, serverId, country, unmatched });
  const front = new FrontDoor({
    enabled: deps.fastPath !== false,
    serverId,
    country,
    recorder: (path) => (deps.instrument === false ? undefined : telemetry.controllers.get(path)),
    logger,
  });

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // No per-request info lines (several µs each); the error path logs what matters.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    genReqId: requestIdOf,
    serverFactory: (handler, opts) => front.server(handler, opts as FactoryOptions),
    childLoggerFactory: (root, bindings) =>
      new LazyRequestLogger(root as Logger, String(bindings.request_id)) as unknown as FastifyBaseLogger,
    bodyLimit: config.app.server.body_limit_bytes,
    trustProxy: config.app.server.trusted_proxies,
    // Requests that arrive while draining are still answered normally, with our headers.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ajv: { customOptions: AJV_OPTIONS },
    schemaErrorFormatter,
    // The router's refusals (a malformed %-escape, an over-long parameter): no route and none of
    // its hooks run, so the answer is counted here, under the unmatched key. fastify's message
    // quotes the raw URL, query string and all, which can carry a postback key or a token: the
    // record keeps the path only.
    frameworkErrors: (err, request, reply) => {
      err.message = withoutQueries(err.message);
      sendApiError(request, reply, err, serverId);
      if (deps.instrument !== false) unmatched.record(reply.elapsedTime, outcomeOf(reply.statusCode));
    },
    clientErrorHandler: (err, socket) => refusals.clientError(err as NodeJS.ErrnoException, socket as Socket),
    // Node's own bare 400 for a Host-less HTTP/1.1 request is replaced by the contract's (onRequest).
    // A request without Content-Length or Transfer-Encoding is born with its stream ended: none of
    // a body stream's ticks per `/go` click (~2 µs of its main-thread CPU); see preParsing below.
    http: { requireHostHeader: false, optimizeEmptyRequests: true },
  });

  frontDoors.set(app, front);
  app.addHook('preClose', (done) => {
    front.closing();
    done();
  });
  refusals.attach(app.server);

  trackConnections(app.server);
  app.decorateRequest('headerCountry', undefined);
  // Read by /go only: worked out when asked, by the same rules as the fast path's.
  app.decorateRequest('country', {
    getter(this: FastifyRequest) {
      return this.headerCountry ?? country.byAddress(country.clientAddress(this.raw));
    },
  });
  app.decorateRequest('clientAddress', {
    getter(this: FastifyRequest) {
      return country.clientAddress(this.raw);
    },
  });
  app.addHook('onRequest', (request, reply, done) => {
    request.headerCountry = country.fromHeader(request.raw);
    setTracingHeaders(request, reply, serverId);
    const refused = framingProblem(request.raw);
    if (refused !== undefined) {
      // Its body, if any, is not read: what follows on the connection cannot be trusted to start a
      // request, so the connection ends with this answer (as for the parser's own refusals).
      reply.header('connection', 'close');
      done(refused);
      return;
    }
    done();
  });

  // A request born ended (optimizeEmptyRequests) has emitted its 'end' before anyone listened;
  // fastify still parses a body for any method that may carry one (POST, PUT, PATCH, DELETE,
  // OPTIONS...) when it names a Content-Type, on a route, a 405 or a 404 alike, and would wait for
  // that 'end' forever. It parses an empty stream instead: what it would have read.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (payload.readableEnded && request.headers['content-type'] !== undefined) done(null, Readable.from([]));
    else done(null, payload);
  });

  registerRouteTable(app, { telemetry, unmatched, serverId, instrument: deps.instrument !== false });

  app.setErrorHandler((err, request, reply) => {
    // The client went away in the middle of its body (or the node cut it at its stop deadline):
    // nothing can be answered, so there is no API error to record or count, only a note.
    if ((err as NodeJS.ErrnoException).code === 'ECONNRESET') {
      request.log.info({ error: (err as Error).message }, 'request aborted before its answer');
      reply.hijack();
      request.raw.socket?.destroy();
      return;
    }
    return sendApiError(request, reply, err, serverId);
  });

  registerJsonBody(app);
  return app;
}

/** `text` with every query string in it (from `?` to the next quote or space) cut to `?…`. */
function withoutQueries(text: string): string {
  return text.replace(/\?[^'"\s]*/g, '?…');
}
