import { connect, type Socket } from 'node:net';

/**
 * Clients stalled mid-request: each connects to the node at `url`, sends half a request head for
 * `path`, then nothing. A graceful stop must close them at its deadline rather than wait on them.
 * The caller destroys the sockets when done.
 */
export async function stallClients(url: string, n: number, path = '/go/stalled'): Promise<Socket[]> {
  const { hostname, port } = new URL(url);
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Socket>((res, rej) => {
          const s = connect(Number(port), hostname, () => {
            s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n`);
            res(s);
          });
          s.on('error', rej);
        }),
    ),
  );
}
