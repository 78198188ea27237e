/**
 * Leader election. `local` (this file) makes the single node the leader; the PostgreSQL lease with a
 * fencing epoch arrives with the cron capability (issue #5) behind the same interface.
 */
export interface LeaderElection {
  readonly kind: 'local' | 'postgres';
  isLeader(): boolean;
  /** Fencing token: grows every time leadership changes hands; 0 when never leader. */
  epoch(): number;
  start(): Promise<void>;
  /** Releases leadership (so another node can take over at once) and stops renewing. */
  stop(): Promise<void>;
}

export class LocalElection implements LeaderElection {
  readonly kind = 'local' as const;
  #leader = false;
  isLeader(): boolean {
    return this.#leader;
  }
  epoch(): number {
    return this.#leader ? 1 : 0;
  }
  async start(): Promise<void> {
    this.#leader = true;
  }
  async stop(): Promise<void> {
    this.#leader = false;
  }
}
