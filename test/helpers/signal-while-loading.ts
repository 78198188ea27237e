/**
 * Preloaded into a `sluice start` process (`node --import`): the process sends itself SIGTERM the
 * moment its modules first ask for fastify, in the middle of loading its code — a stop asked for
 * before any of the node has run, at the same point on every run.
 */
import { registerHooks } from 'node:module';

let sent = false;
registerHooks({
  resolve(specifier, context, next) {
    if (!sent && specifier === 'fastify') {
      sent = true;
      process.kill(process.pid, 'SIGTERM');
    }
    return next(specifier, context);
  },
});
