import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server, so a test can take the database "down" (drop
 * every connection and refuse new ones) and bring it back, without stopping the shared server.
 */
export class TcpProxy {
  readonly #target: { host: string; port: number };
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  #frozen = false;
  #delayMs = 0;
  port = 0;

  constructor(targetHost: string, targetPort: number) {
    this.#target = { host: targetHost, port: targetPort };
  }

  async start(port = 0): Promise<number> {
    const server = createServer((client) => {
      if (this.#frozen) {
        // The partition holds new connections too: accepted, and then nothing.
        this.#sockets.add(client);
        client.on('close', () => this.#sockets.delete(client));
        client.on('error', () => client.destroy());
        client.pause();
        return;
      }
      const upstream = createConnection(this.#target);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      this.#forward(client, upstream);
      this.#forward(upstream, client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    const addr = server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : port;
    return this.port;
  }

  /** Passes what `from` sends on to `to`, `delayMs` later when a delay is set (in order either way). */
  #forward(from: Socket, to: Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (this.#delayMs === 0) to.write(chunk);
      // Timers of one duration fire in the order they were set: the bytes keep their order.
      else setTimeout(() => to.destroyed || to.write(chunk), this.#delayMs);
    });
    from.on('end', () => {
      if (this.#delayMs === 0) to.end();
      else setTimeout(() => to.end(), this.#delayMs);
    });
  }

  /**
   * A slow network: from now on each chunk, in either direction, is passed on `ms` later (a round
   * trip takes 2 × `ms` more); 0 passes at once again.
   */
  delay(ms: number): void {
    this.#delayMs = ms;
  }

  /** Drops every connection and stops listening: clients see resets, then refusals. */
  async down(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.#frozen = false;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }

  /**
   * A partition: connections stay open but nothing passes any more, and no reset is sent — the
   * case a closed socket does not show; a new connection is accepted and then hears nothing.
   * `down()` ends it.
   */
  freeze(): void {
    this.#frozen = true;
    for (const s of this.#sockets) s.pause();
  }

  /** Listens again on the same port. */
  async up(): Promise<void> {
    await this.start(this.port);
  }
}
