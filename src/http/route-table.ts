import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import { ApiError } from '../errors/index.ts';
import { outcomeOf, type Recorder, type Telemetry } from '../telemetry/index.ts';
import { sendApiError } from './error-reply.ts';

export interface RouteTableDeps {
  telemetry: Telemetry;
  /** The recorder of requests no route takes (UNMATCHED_ROUTE). */
  unmatched: Recorder;
  serverId: string;
  /** Per-route recording; off only for the benchmark that measures what recording costs. */
  instrument: boolean;
}

/**
 * The table of the app's routes as they are added, and what it answers: each route's recorder
 * bound into its own onResponse hook, and a request no route takes answered 405 (with `Allow`)
 * when its path is a route's under another method, else 404 (docs/errors.md#codes), counted under
 * that route's path or the unmatched key.
 */
export function registerRouteTable(app: FastifyInstance, deps: RouteTableDeps): void {
  const { telemetry, unmatched, serverId } = deps;
  // Each route gets its own recorder bound into its own onResponse hook: no lookup per request.
  // The methods of each path are kept too, so that another method on a known path is a 405.
  const staticRoutes = new Map<string, Set<string>>();
  const paramRoutes: { path: string; pattern: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    const path = route.url ?? route.path;
    if (!path.includes(':') && !path.includes('*')) {
      const methods = staticRoutes.get(path) ?? new Set<string>();
      for (const m of [route.method].flat()) methods.add(m);
      staticRoutes.set(path, methods);
    } else {
      let known = paramRoutes.find((r) => r.path === path);
      if (known === undefined) {
        known = { path, pattern: routePattern(path), methods: new Set() };
        paramRoutes.push(known);
      }
      for (const m of [route.method].flat()) known.methods.add(m);
    }
    if (!deps.instrument) return;
    const recorder = telemetry.controllers.get(path);
    const record: onResponseHookHandler = (_request, reply, done) => {
      recorder.record(reply.elapsedTime, outcomeOf(reply.statusCode));
      done();
    };
    const existing = route.onResponse;
    route.onResponse = existing === undefined ? [record] : [...[existing].flat(), record];
  });

  const pathOf = (url: string) => {
    const q = url.indexOf('?');
    return q === -1 ? url : url.slice(0, q);
  };
  /** The route a path belongs to whatever the method, and that route's methods; undefined when none. */
  const routeOf = (path: string): { path: string; methods: Set<string> } | undefined => {
    const methods = staticRoutes.get(path);
    if (methods !== undefined) return { path, methods };
    return paramRoutes.find((r) => r.pattern.test(path));
  };
  // In a scope of its own, so that its onResponse hook is the 404 context's only: an unmatched
  // request is counted however it was answered (the handler below, a body refused by the JSON
  // parser, or a body refused by Node's HTTP parser), not only when the handler runs.
  app.register((scope, _opts, ready) => {
    scope.addHook('onResponse', (request, reply, done) => {
      const route = routeOf(pathOf(request.url));
      // Wrong method on a known path is recorded under that path; everything else shares one key.
      const recorder = route !== undefined ? telemetry.controllers.get(route.path) : unmatched;
      recorder.record(reply.elapsedTime, outcomeOf(reply.statusCode));
      done();
    });
    scope.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
      const methods = routeOf(pathOf(request.url))?.methods;
      if (methods) {
        const allow = [...methods].sort().join(', ');
        return sendApiError(
          request,
          reply,
          new ApiError('request.method_not_allowed', `Method not allowed here; allowed: ${allow}.`, {
            headers: { allow },
          }),
          serverId,
        );
      }
      return sendApiError(
        request,
        reply,
        new ApiError('resource.not_found', 'No route matches this method and path.'),
        serverId,
      );
    });
    ready();
  });
}

/** A route path with parameters (`/go/:slug`, `/acp/assets/*`) as a pattern a request path matches. */
function routePattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((part) =>
      part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${source}$`);
}
