import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What outgoing calls and log lines need to know about the work they belong to: the request being
 * served, or the task run being executed. Carried by AsyncLocalStorage, entered only around ACP
 * handlers and task runs — never on the redirect hot path, where it would cost without use.
 */
export interface WorkContext {
  request_id?: string;
  task?: string;
  run_id?: string;
}

const storage = new AsyncLocalStorage<WorkContext>();

export function runWithContext<T>(ctx: WorkContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentContext(): WorkContext | undefined {
  return storage.getStore();
}
