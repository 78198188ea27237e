import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { type Config, ConfigError } from '../config/index.ts';

/** A stable-looking id for this process when `app.server.id` is unset: host name plus 8 hex. */
export function generateServerId(): string {
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 100) || 'node';
  return `${host}-${randomBytes(4).toString('hex')}`;
}

/**
 * Listens where `app.server` says; returns the node's URL and the one its peers reach it by
 * (`cluster.advertise_url`, else this host's name for a wildcard address). An address that cannot
 * be listened on is a configuration error naming the key.
 */
export async function listen(
  app: FastifyInstance,
  config: Config,
): Promise<{ url: string; advertised: string }> {
  const { host: listenHost, port: listenPort } = config.app.server;
  await app.listen({ host: listenHost, port: listenPort }).catch((err: NodeJS.ErrnoException) => {
    throw listenError(err, listenHost, listenPort);
  });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : listenPort;
  const url = `http://${listenHost.includes(':') ? `[${listenHost}]` : listenHost}:${port}`;
  const wildcard = listenHost === '0.0.0.0' || listenHost === '::';
  return {
    url,
    advertised: config.cluster.advertise_url ?? (wildcard ? `http://${hostname()}:${port}` : url),
  };
}

/** Why the configured address cannot be listened on, as a configuration error naming the keys. */
function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const why: Record<string, string> = {
    EADDRINUSE: `app.server.port: ${where} is already in use; stop what holds it, or choose another port: app.server.port in the configuration, or APP__APP__SERVER__PORT=<port> in the environment`,
    EACCES: `app.server.port: ${where} needs privileges this process lacks; choose a port above 1023`,
    EADDRNOTAVAIL: `app.server.host: ${host} is not an address of this machine`,
  };
  const message = err.code === undefined ? undefined : why[err.code];
  return message === undefined ? err : new ConfigError(`config: ${message} (${err.code})`, { cause: err });
}
