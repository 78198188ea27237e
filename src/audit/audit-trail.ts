import type { Logger } from 'pino';
import type { AuditStore } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';

/** How long audit rows are kept: a week, like the run journal. */
export const AUDIT_KEEP_MS = 7 * 86_400_000;
/** How often the leader deletes rows past {@link AUDIT_KEEP_MS}. */
export const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;

/** One successful ACP write, as the router hands it over. */
export interface AuditEvent {
  operator: string;
  /** `<target_type>.<verb>`; the target type is the part before the dot. */
  action: string;
  target_id: string;
  request_id: string;
}

export interface AuditTrailOptions {
  store: AuditStore;
  logger: Logger;
  clock: Clock;
  serverId: string;
  /** Whether this node leads: only the leader prunes (one node is enough, as for the node registry). */
  isLeader: () => boolean;
  keepMs?: number;
  pruneIntervalMs?: number;
}

/**
 * Who changed what (docs/audit.md#what-is-audited): every audited ACP write becomes one `audit` log
 * record and one row of the audit log. Only what the router gives is recorded — names, the action,
 * the target's id, the request id — never a request body, so a secret (an operator's new token)
 * cannot reach either.
 *
 * The record is written first and the row second, after the write itself succeeded (the write and
 * its row are not one transaction: the services own their transactions). A row that cannot be
 * written is logged (`audit row not written`) and does not turn the answer into an error: the
 * change happened, and a 5xx would invite a retry of a create. The log record stays the trace.
 */
export class AuditTrail {
  readonly #o: AuditTrailOptions;
  readonly #keepMs: number;
  #timer: NodeJS.Timeout | undefined;
  #pruning: Promise<number> | undefined;

  constructor(o: AuditTrailOptions) {
    this.#o = o;
    this.#keepMs = o.keepMs ?? AUDIT_KEEP_MS;
  }

  async record(e: AuditEvent): Promise<void> {
    const dot = e.action.indexOf('.');
    const entry = {
      operator: e.operator,
      action: e.action,
      target_type: dot > 0 ? e.action.slice(0, dot) : e.action,
      target_id: e.target_id,
      request_id: e.request_id,
    };
    this.#o.logger.info({ ...entry, trace_id: e.request_id }, 'audit');
    try {
      await this.#o.store.append({ ...entry, server_id: this.#o.serverId });
    } catch (err) {
      this.#o.logger.error(
        { err: (err as Error).message, action: e.action, request_id: e.request_id },
        'audit row not written',
      );
    }
  }

  /** On the leader, deletes the rows older than the retention; a failure is logged, never thrown. */
  async prune(): Promise<number> {
    if (!this.#o.isLeader()) return 0;
    try {
      return await this.#o.store.deleteOlderThan(new Date(this.#o.clock.now() - this.#keepMs).toISOString());
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'audit retention failed; retried within the hour');
      return 0;
    }
  }

  /** Prunes now and then every hour while the node runs (one prune at a time). */
  start(): void {
    const tick = () => {
      this.#pruning ??= this.prune().finally(() => {
        this.#pruning = undefined;
      });
    };
    tick();
    this.#timer = setInterval(tick, this.#o.pruneIntervalMs ?? AUDIT_PRUNE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops the hourly prune and waits for one in flight, so storage can close after it. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#pruning;
  }
}
