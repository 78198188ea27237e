import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Authenticator, type AuthLimiter, type Principal } from '../auth/index.ts';
import type { Role } from '../config/index.ts';
import { runWithContext } from '../telemetry/index.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated ACP operator (ACP routes only). */
    principal: Principal | null;
  }
}

/** Body of the endpoints that take none: `{}` (or an empty body); unknown keys are refused. */
export const EmptyBody = Type.Object({}, { additionalProperties: false });

export interface AcpCall<B> {
  body: B;
  principal: Principal;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface AcpRouteDef<S extends TSchema> {
  path: string;
  /** Least role allowed to call it. */
  role: Role;
  body?: S;
  handler: (call: AcpCall<Static<S>>) => unknown | Promise<unknown>;
}

/**
 * Registers ACP endpoints (§4): `POST`, JSON in and out, bearer authentication and the role check
 * before the body is even parsed, the body validated against its schema, and the handler run
 * inside a work context carrying the request id (for outgoing calls and logs). It also keeps the
 * list of every route and its role, which the access-control tests walk.
 */
export class AcpRouter {
  readonly #app: FastifyInstance;
  readonly #auth: Authenticator;
  readonly #limiter: AuthLimiter | undefined;
  readonly #routes: { path: string; role: Role }[] = [];

  constructor(app: FastifyInstance, auth: Authenticator, limiter?: AuthLimiter) {
    this.#app = app;
    this.#auth = auth;
    this.#limiter = limiter;
    if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', null);
  }

  get routes(): readonly { path: string; role: Role }[] {
    return this.#routes;
  }

  add<S extends TSchema = typeof EmptyBody>(def: AcpRouteDef<S>): void {
    const auth = this.#auth;
    const limiter = this.#limiter;
    this.#routes.push({ path: def.path, role: def.role });
    this.#app.route({
      method: 'POST',
      url: def.path,
      schema: { body: def.body ?? EmptyBody },
      onRequest: async (request) => {
        const authenticate = () => auth.authenticate(request.headers.authorization);
        const principal = await (limiter ? limiter.guard(request.ip, authenticate) : authenticate());
        Authenticator.require(principal, def.role);
        request.principal = principal;
      },
      preValidation: (request, _reply, done) => {
        if (request.body === undefined || request.body === null) request.body = {};
        done();
      },
      handler: (request, reply) =>
        runWithContext({ request_id: request.id }, () =>
          def.handler({ body: request.body as Static<S>, principal: request.principal!, request, reply }),
        ),
    });
  }
}
