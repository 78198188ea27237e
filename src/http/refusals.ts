import {
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ApiError, type ErrorCode } from '../errors/index.ts';
import { CLIENT_ERROR, type Logger, outcomeOf, type Recorder } from '../telemetry/index.ts';
import { describeApiError } from './error-reply.ts';
import { inTurn } from './fast-path.ts';
import { type CountryResolver, newRequestId, requestIdFrom } from './request-context.ts';

/** What Node keeps on a server connection that this module reads (not in Node's types). */
type HttpConnection = Socket & {
  /** The response being written on this connection, if any (later ones queue behind it). */
  _httpMessage?: ServerResponse | null;
  /** The request whose head the parser has read; `complete` once its body has been read too. */
  parser?: { incoming?: IncomingMessage | null } | null;
};

export interface RefusalDeps {
  logger: Logger;
  serverId: string;
  country: CountryResolver;
  /** Where refusals that never reached a route are counted (`__unmatched__`). */
  unmatched: Recorder;
}

/**
 * The answers Node's HTTP layer would otherwise give (or not give) on its own, outside fastify:
 * a request its parser refuses, an `Expect` other than `100-continue` (Node's bare 417), and
 * `CONNECT` (Node drops the connection). Each gets the contract instead: its code, `X-Request-Id`,
 * `X-Server-Id`, a JSON body and exactly one `api error` record. The connection is closed after
 * the answer, and never left half-open, so a graceful stop never waits for such a client.
 */
export class Refusals {
  readonly #logger: Logger;
  readonly #serverId: string;
  readonly #country: CountryResolver;
  readonly #unmatched: Recorder;
  /** Connections already being refused: the parser repeats its error on every later read. */
  readonly #refusing = new WeakSet<Socket>();

  constructor(deps: RefusalDeps) {
    this.#logger = deps.logger;
    this.#serverId = deps.serverId;
    this.#country = deps.country;
    this.#unmatched = deps.unmatched;
  }

  /** Takes over the requests Node would answer itself (its `checkExpectation` and `connect` events). */
  attach(server: Server): void {
    // With a listener, Node neither answers 417 nor dispatches the request to fastify.
    // In its turn, as every request: behind an answer that closed the connection it is not answered,
    // so it is neither logged nor counted.
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) =>
      inTurn(req, res, () => {
        this.#answerOn(
          res,
          req,
          new ApiError('request.expectation_failed', 'Only "Expect: 100-continue" is supported.', {
            cause: 'an Expect other than 100-continue',
          }),
        );
        this.#unmatched.record(0, CLIENT_ERROR);
      }),
    );
    server.on('connect', (req: IncomingMessage, socket: Duplex) => {
      // Node hands the socket over without its error listener: a client reset must not throw.
      socket.on('error', () => {});
      this.#answerRaw(
        socket,
        new ApiError('validation.invalid_input', 'CONNECT is not served: Sluice is not a proxy.', {
          cause: 'a CONNECT request',
        }),
        requestIdFrom(req),
        this.#country.fromHeader(req),
      );
    });
  }

  /**
   * fastify's `clientErrorHandler`: the parser refused bytes on this connection (a bare CR or LF in
   * a header, headers over 16 KB, a bad chunk size, an unknown transfer coding, ...). A client that
   * left (a reset, or its end of the connection closed in the middle of a request), or a request
   * that timed out, gets no answer: there is nobody to answer, and no API error to record.
   */
  clientError(err: NodeJS.ErrnoException, socket: Socket): void {
    if (
      err.code === 'ECONNRESET' ||
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ||
      err.code === 'HPE_INVALID_EOF_STATE'
    ) {
      socket.destroy();
      return;
    }
    if (this.#refusing.has(socket)) return;
    if (!socket.writable) {
      // Our side is already closing (a `connection: close` answer): let that answer flush.
      socket.destroySoon();
      return;
    }
    this.#refusing.add(socket);
    const conn = socket as HttpConnection;
    // A request whose head was read but not its whole body: the error is in its body (or in a
    // transfer coding noticed after its head), and it has already been handed to fastify.
    const incoming = conn.parser?.incoming;
    this.#refuseInTurn(conn, parserRefusal(err), incoming && !incoming.complete ? incoming : undefined);
  }

  /**
   * Answers a refusal in its turn, so that answers never interleave and fastify never answers a
   * request twice. When the refused request is the one being answered, nothing is written yet and
   * fastify is reading its body (which will now never end), the refusal is its answer: fastify
   * stops at its next step, the reply being sent, and the route's own recorder counts it. Otherwise
   * (fastify has not come to the body yet, or an answer is under way or pending on this connection)
   * the refusal waits: for fastify to start reading the body, or for that answer to finish, after
   * which it is the next answer on the connection.
   */
  #refuseInTurn(conn: HttpConnection, refused: ApiError, request: IncomingMessage | undefined): void {
    if (!conn.writable) return;
    const res = conn._httpMessage;
    if (!res) {
      // The refused request, if any, has had its answer: the refusal is the connection's last one.
      this.#answerRaw(conn, refused, newRequestId());
      return;
    }
    const unanswered = request !== undefined && res.req === request && !res.headersSent;
    if (unanswered && request.readableFlowing === true) {
      this.#answerOn(res, request, refused);
      return;
    }
    const retry = () => {
      res.off('finish', retry);
      request?.off('resume', retry);
      this.#refuseInTurn(conn, refused, request);
    };
    res.on('finish', retry);
    // fastify reads a body only after the route's onRequest hooks (the ACP's authentication).
    if (unanswered) request.on('resume', retry);
  }

  /** The refusal as the response of a request Node parsed the head of (its id honours X-Request-Id). */
  #answerOn(res: ServerResponse, req: IncomingMessage, refused: ApiError): void {
    const id = requestIdFrom(req);
    const { body, record } = describeApiError(refused, id);
    const json = JSON.stringify(body);
    const headers: OutgoingHttpHeaders = { 'x-request-id': id, 'x-server-id': this.#serverId };
    const country = this.#country.fromHeader(req);
    if (country !== undefined) headers['x-client-country-code'] = country;
    headers['content-type'] = 'application/json; charset=utf-8';
    headers['content-length'] = Buffer.byteLength(json);
    // Node ends the connection after a `connection: close` answer (destroySoon: not left half-open).
    headers.connection = 'close';
    res.writeHead(refused.status, headers).end(json);
    this.#log(record, id);
  }

  /** The refusal written on the connection itself: no request object to answer through. */
  #answerRaw(socket: Duplex, refused: ApiError, id: string, country?: string): void {
    const { status } = refused;
    const { body, record } = describeApiError(refused, id);
    const json = JSON.stringify(body);
    // The server allows half-open connections: without the destroy, a client that keeps its end
    // open would hold the connection, and a graceful stop would wait for it forever.
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nx-request-id: ${id}\r\nx-server-id: ${this.#serverId}\r\n` +
        (country === undefined ? '' : `x-client-country-code: ${country}\r\n`) +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(json)}\r\n` +
        `connection: close\r\n\r\n${json}`,
      () => socket.destroy(),
    );
    this.#unmatched.record(0, outcomeOf(status));
    this.#log(record, id);
  }

  #log(record: Record<string, unknown>, id: string): void {
    this.#logger.error({ ...record, request_id: id, trace_id: id }, 'api error');
  }
}

/** The contract error for a parser refusal, with the parser's code and message as its cause. */
function parserRefusal(err: NodeJS.ErrnoException): ApiError {
  const [code, message]: [ErrorCode, string | undefined] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? ['request.headers_too_large', undefined]
      : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
        ? ['request.too_large', 'The chunk extensions of the request body are too large.']
        : ['validation.invalid_input', 'The request is not valid HTTP.'];
  // Only the parser's code and message: its raw bytes may hold an Authorization header.
  return new ApiError(code, message, { cause: `${err.code ?? 'HPE'}: ${err.message}` });
}
