import type { FastifyInstance } from 'fastify';
import { ApiError, hasCode } from '../errors/index.ts';

/** `GET /healthz`: the process answers. `GET /readyz`: and its storage answers too. */
export function registerHealth(app: FastifyInstance, ready: () => Promise<void>): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async () => {
    try {
      await ready();
    } catch (err) {
      throw hasCode(err, 'db.unavailable') ? err : new ApiError('db.unavailable', undefined, { cause: err });
    }
    return { status: 'ready' };
  });
}
