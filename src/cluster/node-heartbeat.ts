import type { Logger } from 'pino';
import type { ClusterStore } from '../storage/index.ts';

/** This node as the registry shows it. */
export interface NodeIdentity {
  server_id: string;
  started_at: string;
  version: string | undefined;
  commit: string;
  /** Where peers reach it; set once the server listens. */
  url?: string | null;
}

export interface NodeHeartbeatOptions {
  store: ClusterStore;
  node: NodeIdentity;
  logger: Logger;
  /** `cluster.forget_after_ms`: the leader deletes nodes unseen this long. */
  forgetAfterMs: number;
}

/**
 * This node's entry in the node registry (`nodes`), driven by its election: a beat at every
 * renewal, and on a graceful stop it leaves the registry, so a departed node is neither listed as
 * alive nor mistaken for anything else. A node that crashes stays listed, `alive: false` after three
 * renewals, until the leader forgets it after `cluster.forget_after_ms`. Failures are logged, never
 * thrown: the registry is for people, and must not stop a node from running or stopping.
 */
export class NodeHeartbeat {
  readonly #o: NodeHeartbeatOptions;

  constructor(opts: NodeHeartbeatOptions) {
    this.#o = opts;
  }

  /** Where peers reach this node, known once the server listens (sent with the next beat). */
  advertise(url: string): void {
    this.#o.node.url = url;
  }

  async beat(isLeader: boolean): Promise<void> {
    try {
      await this.#o.store.heartbeat({ ...this.#o.node, is_leader: isLeader });
      // One node is enough to prune, and the leader is the one node there is (at most).
      if (isLeader) await this.#o.store.forgetNodes(this.#o.forgetAfterMs);
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message }, 'node heartbeat failed');
    }
  }

  async leave(): Promise<void> {
    try {
      await this.#o.store.removeNode(this.#o.node.server_id);
    } catch (err) {
      this.#o.logger.warn(
        { err: (err as Error).message },
        'leaving the node registry failed; the node shows as not alive after three renewals',
      );
    }
  }
}
