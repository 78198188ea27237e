import type { Fence } from '../storage/index.ts';
import type { NodeHeartbeat } from './node-heartbeat.ts';

export type LeadershipListener = (isLeader: boolean, epoch: number) => void;

/**
 * Who leads. `local`: the single node always does. `postgres`: a lease in the shared database,
 * with a fencing epoch (see PostgresElection).
 */
export interface LeaderElection {
  readonly kind: 'local' | 'postgres';
  isLeader(): boolean;
  /** Fencing token: grows every time leadership changes hands or lapses; 0 when never leader. */
  epoch(): number;
  /** What leader-only writes are checked against; undefined when there is nothing to fence (local). */
  fence(): Fence | undefined;
  /** Server id of the current leader as last seen (this node's own id when it leads). */
  leaderId(): string | undefined;
  /**
   * Server id of the leader as of now, read from where leadership lives (the lease row for
   * `postgres`), not from this node's last renewal; undefined when nobody holds it.
   */
  currentLeader(): Promise<string | undefined>;
  onChange(listener: LeadershipListener): void;
  start(): Promise<void>;
  /** Releases leadership (so another node can take over at once) and stops renewing. */
  stop(): Promise<void>;
}

export interface LocalElectionOptions {
  /** The node registry entry, beaten every `renewIntervalMs` while the node runs. */
  heartbeat?: NodeHeartbeat;
  renewIntervalMs?: number;
}

export class LocalElection implements LeaderElection {
  readonly kind = 'local' as const;
  readonly #serverId: string;
  readonly #o: LocalElectionOptions;
  #leader = false;
  readonly #listeners: LeadershipListener[] = [];
  #timer: NodeJS.Timeout | undefined;
  #beat: Promise<void> = Promise.resolve();
  constructor(serverId: string, opts: LocalElectionOptions = {}) {
    this.#serverId = serverId;
    this.#o = opts;
  }
  leaderId(): string | undefined {
    return this.#leader ? this.#serverId : undefined;
  }
  async currentLeader(): Promise<string | undefined> {
    return this.leaderId();
  }
  isLeader(): boolean {
    return this.#leader;
  }
  epoch(): number {
    return this.#leader ? 1 : 0;
  }
  fence(): Fence | undefined {
    return undefined;
  }
  onChange(listener: LeadershipListener): void {
    this.#listeners.push(listener);
  }
  async start(): Promise<void> {
    this.#leader = true;
    for (const l of this.#listeners) l(true, 1);
    const { heartbeat, renewIntervalMs } = this.#o;
    if (heartbeat) {
      await heartbeat.beat(true);
      // Nothing to renew, but the registry lists a node unseen for three intervals as not alive.
      if (renewIntervalMs) {
        let pending = false;
        this.#timer = setInterval(() => {
          // A beat still waiting on the database is not queued behind: the next one will do.
          if (pending) return;
          pending = true;
          this.#beat = heartbeat.beat(this.#leader).finally(() => {
            pending = false;
          });
        }, renewIntervalMs);
        this.#timer.unref();
      }
    }
  }
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#leader = false;
    for (const l of this.#listeners) l(false, 1);
    await this.#beat;
    await this.#o.heartbeat?.leave();
  }
}
