import type { Logger } from 'pino';
import type { ClusterStore, Fence } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import type { LeaderElection, LeadershipListener } from './election.ts';
import type { NodeHeartbeat } from './node-heartbeat.ts';

export interface PostgresElectionOptions {
  store: ClusterStore;
  serverId: string;
  clock: Clock;
  logger: Logger;
  leaseTtlMs: number;
  renewIntervalMs: number;
  /** The node registry entry: beaten after every renewal attempt, left on stop. */
  heartbeat?: NodeHeartbeat;
}

/**
 * Leadership through a lease row in PostgreSQL, taken and renewed by one conditional upsert on the
 * database's clock (see ClusterStore.acquire). The node believes itself leader only until
 * `lease_ttl_ms` after its last successful renewal *started*, less a safety margin — measured on
 * its own monotonic clock — so when it cannot renew (database gone, process paused) it steps down
 * before anyone else can take over, and the epoch fences any write it still attempts.
 */
export class PostgresElection implements LeaderElection {
  readonly kind = 'postgres' as const;
  readonly #o: PostgresElectionOptions;
  readonly #listeners: LeadershipListener[] = [];
  #epoch = 0;
  #leader = false;
  #deadline = 0;
  #renewTimer: NodeJS.Timeout | undefined;
  #expiryTimer: NodeJS.Timeout | undefined;
  #running = false;
  #tick: Promise<void> = Promise.resolve();
  #leaderId: string | undefined;

  constructor(opts: PostgresElectionOptions) {
    this.#o = opts;
  }

  isLeader(): boolean {
    return this.#leader && this.#o.clock.monotonic() < this.#deadline;
  }

  epoch(): number {
    return this.#epoch;
  }

  fence(): Fence | undefined {
    return { holder: this.#o.serverId, epoch: this.#epoch };
  }

  leaderId(): string | undefined {
    if (this.isLeader()) return this.#o.serverId;
    // Its own lease ran out without a renewal: who leads now is not known here.
    return this.#leaderId === this.#o.serverId ? undefined : this.#leaderId;
  }

  async currentLeader(): Promise<string | undefined> {
    return (await this.#o.store.currentLease())?.holder;
  }

  onChange(listener: LeadershipListener): void {
    this.#listeners.push(listener);
  }

  async start(): Promise<void> {
    this.#running = true;
    this.#tick = this.#renew();
    await this.#tick;
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#running) return;
    this.#renewTimer = setTimeout(() => {
      this.#tick = this.#renew().finally(() => this.#schedule());
    }, this.#o.renewIntervalMs);
    this.#renewTimer.unref();
  }

  async #renew(): Promise<void> {
    const { store, serverId, clock, leaseTtlMs, logger } = this.#o;
    const startedAt = clock.monotonic();
    try {
      const epoch = await store.acquire(serverId, leaseTtlMs);
      if (!this.#running) {
        // Stopped while asking: a lease won in that instant is given back (stop() waits for this
        // tick), not left to expire while the next leader waits out its TTL.
        if (epoch !== undefined) await store.release({ holder: serverId, epoch }).catch(() => {});
        return;
      }
      if (epoch === undefined) {
        this.#set(false, 'another node holds the lease');
        this.#leaderId = (await store.currentLease())?.holder;
      } else {
        this.#leaderId = serverId;
        // Believe the lease until its TTL from when we asked, less a margin for clock rate drift.
        this.#deadline = startedAt + leaseTtlMs - Math.min(1000, leaseTtlMs / 10);
        this.#epoch = epoch;
        this.#set(true, 'lease acquired');
        this.#armExpiry();
      }
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'leader lease renewal failed');
      if (!this.isLeader()) {
        // The lease cannot be read: the leader last seen may be gone; say so rather than name it.
        this.#leaderId = undefined;
        this.#set(false, 'lease could not be renewed');
      }
    }
    await this.#o.heartbeat?.beat(this.isLeader());
  }

  /** Steps down exactly when the believed lease runs out, even if a renewal is still hanging. */
  #armExpiry(): void {
    if (this.#expiryTimer) clearTimeout(this.#expiryTimer);
    const wait = Math.max(0, this.#deadline - this.#o.clock.monotonic());
    this.#expiryTimer = setTimeout(() => {
      if (this.#leader && this.#o.clock.monotonic() >= this.#deadline)
        this.#set(false, 'lease expired before renewal');
    }, wait);
    this.#expiryTimer.unref();
  }

  #set(leader: boolean, why: string, expected = false): void {
    if (leader === this.#leader) return;
    this.#leader = leader;
    // Losing the lease is worth a warning; handing it over on a graceful stop is not.
    this.#o.logger[leader || expected ? 'info' : 'warn'](
      { epoch: this.#epoch, reason: why },
      leader ? 'became leader' : 'stepped down',
    );
    for (const l of this.#listeners) l(leader, this.#epoch);
  }

  /** Stops renewing and, when leader, releases the lease so another node takes over at once. */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    if (this.#expiryTimer) clearTimeout(this.#expiryTimer);
    await this.#tick.catch(() => {});
    const wasLeader = this.isLeader();
    const fence = { holder: this.#o.serverId, epoch: this.#epoch };
    this.#set(false, 'node stopping', true);
    if (wasLeader) {
      try {
        await this.#o.store.release(fence);
      } catch (err) {
        this.#o.logger.warn(
          { err: (err as Error).message },
          'releasing the leader lease failed; it will expire',
        );
      }
    }
    await this.#o.heartbeat?.leave();
  }
}
