import { type Static, type TSchema, Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuditTrail } from '../audit/index.ts';
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

/**
 * How a write route is audited (docs/audit.md#what-is-audited): its action (`<target_type>.<verb>`)
 * and the id of what it changed, read from the request body or from what the handler answered (a
 * created flow's id).
 */
export interface AcpAudit<B> {
  action: string;
  target: (call: { body: B; result: unknown }) => string;
}

export interface AcpRouteDef<S extends TSchema> {
  path: string;
  /** Least role allowed to call it. */
  role: Role;
  body?: S;
  /** Set on every route that changes something: its successful calls are audited. */
  audit?: AcpAudit<Static<S>>;
  handler: (call: AcpCall<Static<S>>) => unknown | Promise<unknown>;
}

export interface AcpRouteInfo {
  path: string;
  role: Role;
  /** The schema its body is validated against (docs/api.md lists its fields; a test compares). */
  body: TSchema;
  /** The audit action of a write route. */
  action?: string;
}

export interface AcpRouterOptions {
  limiter?: AuthLimiter | undefined;
  /** Where audited routes record their successful calls; required once such a route is added. */
  audit?: AuditTrail | undefined;
}

/**
 * Registers ACP endpoints (docs/api.md#conventions): `POST`, JSON in and out, bearer authentication
 * and the role check before the body is even parsed, the body validated against its schema, and the
 * handler run inside a work context carrying the request id (for outgoing calls and logs). It also
 * keeps the list of every route and its role, which the access-control tests walk.
 *
 * A route with an `audit` descriptor is audited here, in one place: once its handler has
 * succeeded (a thrown error — refused, invalid, not found, conflicting — is never audited), the
 * router records who did it, the action, the target and the request id before the answer goes.
 */
export class AcpRouter {
  readonly #app: FastifyInstance;
  readonly #auth: Authenticator;
  readonly #limiter: AuthLimiter | undefined;
  readonly #audit: AuditTrail | undefined;
  readonly #routes: AcpRouteInfo[] = [];

  constructor(app: FastifyInstance, auth: Authenticator, opts: AcpRouterOptions = {}) {
    this.#app = app;
    this.#auth = auth;
    this.#limiter = opts.limiter;
    this.#audit = opts.audit;
    if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', null);
  }

  get routes(): readonly AcpRouteInfo[] {
    return this.#routes;
  }

  add<S extends TSchema = typeof EmptyBody>(def: AcpRouteDef<S>): void {
    const auth = this.#auth;
    const limiter = this.#limiter;
    const trail = this.#audit;
    const audit = def.audit;
    if (audit && !trail) throw new Error(`${def.path} is audited but the router has no audit trail`);
    const body = def.body ?? EmptyBody;
    this.#routes.push(
      audit
        ? { path: def.path, role: def.role, body, action: audit.action }
        : { path: def.path, role: def.role, body },
    );
    const run = async (call: AcpCall<Static<S>>): Promise<unknown> => {
      const result = await def.handler(call);
      if (audit && trail) {
        await trail.record({
          operator: call.principal.name,
          action: audit.action,
          target_id: audit.target({ body: call.body, result }),
          request_id: call.request.id,
        });
      }
      return result;
    };
    this.#app.route({
      method: 'POST',
      url: def.path,
      schema: { body },
      onRequest: async (request) => {
        const authenticate = () => auth.authenticate(request.headers.authorization);
        const principal = await (limiter
          ? limiter.guard(request.ip, authenticate, request.headers.authorization)
          : authenticate());
        Authenticator.require(principal, def.role);
        request.principal = principal;
      },
      preValidation: (request, _reply, done) => {
        // No body at all is `{}` (docs/api.md#conventions); a JSON `null` is a body, and the schema
        // refuses it like `[]`.
        if (request.body === undefined) request.body = {};
        done();
      },
      handler: (request, reply) =>
        runWithContext({ request_id: request.id }, () =>
          run({ body: request.body as Static<S>, principal: request.principal!, request, reply }),
        ),
    });
  }
}
