import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * Open connections per server. Node keeps its own list but only offers "close the idle ones" and
 * "close them all"; a graceful stop needs a third kind: the connections with no answer under way
 * (a client that sent half a request and stalled), which can go without losing anything.
 */
const connections = new WeakMap<Server, Set<Socket>>();

/** Starts tracking a server's connections (once, when the server is made). */
export function trackConnections(server: Server): void {
  const open = new Set<Socket>();
  connections.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
}

/** Node sets `_httpMessage` on a socket from the moment a request is dispatched until its answer ends. */
const answering = (socket: Socket) => Boolean((socket as Socket & { _httpMessage?: unknown })._httpMessage);

/** What a forced drain did, for the stop's log record. */
export interface DrainResult {
  /** Connections closed at the deadline with no answer under way (stalled or half-sent requests). */
  stalled: number;
  /** Connections closed at the last moment with an answer still under way. */
  cut: number;
}

/**
 * Closes the server gracefully within `graceMs`: stops accepting, closes idle keep-alive
 * connections, and lets answers under way finish. At the deadline, connections with no answer
 * under way are closed (nothing is lost: their requests never reached a route); answers still
 * under way get `cutMs` more, then every connection left is closed. Resolves once the server has
 * closed, so whatever the routes counted is final.
 */
export async function drainServer(app: FastifyInstance, graceMs: number, cutMs = 250): Promise<DrainResult> {
  const result: DrainResult = { stalled: 0, cut: 0 };
  const open = connections.get(app.server) ?? new Set<Socket>();
  const timers: NodeJS.Timeout[] = [];
  timers.push(
    setTimeout(() => {
      for (const socket of open) {
        if (answering(socket)) continue;
        result.stalled++;
        socket.destroy();
      }
      timers.push(
        setTimeout(() => {
          result.cut = open.size;
          app.server.closeAllConnections();
        }, cutMs),
      );
    }, graceMs),
  );
  try {
    await app.close();
  } finally {
    for (const t of timers) clearTimeout(t);
  }
  return result;
}
