import type { Fence } from '../storage/index.ts';

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
  onChange(listener: LeadershipListener): void;
  start(): Promise<void>;
  /** Releases leadership (so another node can take over at once) and stops renewing. */
  stop(): Promise<void>;
}

export class LocalElection implements LeaderElection {
  readonly kind = 'local' as const;
  readonly #serverId: string;
  #leader = false;
  readonly #listeners: LeadershipListener[] = [];
  constructor(serverId: string) {
    this.#serverId = serverId;
  }
  leaderId(): string | undefined {
    return this.#leader ? this.#serverId : undefined;
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
  }
  async stop(): Promise<void> {
    this.#leader = false;
    for (const l of this.#listeners) l(false, 1);
  }
}
