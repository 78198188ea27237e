import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { findPackageJSON } from 'node:module';
import { dirname, extname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/index.ts';
import { vocabularyModule } from './vocabulary.ts';

const STATIC_DIR = join(import.meta.dirname, 'static');
/** The generated module of the server's lists ({@link vocabularyModule}). */
const VOCABULARY = 'vocabulary.js';
const pkgDir = (name: string) => dirname(findPackageJSON(name, import.meta.url)!);

/** Browser modules of the libraries the console uses, served as they ship (no build step). */
const VENDOR: Record<string, () => string> = {
  'preact.mjs': () => join(pkgDir('preact'), 'dist/preact.mjs'),
  'hooks.mjs': () => join(pkgDir('preact'), 'hooks/dist/hooks.mjs'),
  'htm.mjs': () => join(pkgDir('htm'), 'dist/htm.mjs'),
  'htm-preact.mjs': () => join(pkgDir('htm'), 'preact/index.mjs'),
  'uplot.mjs': () => join(pkgDir('uplot'), 'dist/uPlot.esm.js'),
  'uplot.css': () => join(pkgDir('uplot'), 'dist/uPlot.min.css'),
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

function asset(path: string, body: Buffer = readFileSync(path)): Asset {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  return { body, type: TYPES[extname(path)] ?? 'application/octet-stream', etag };
}

/**
 * The page's policy: scripts only from this origin plus the inline import map (by its hash), no
 * framing, no referrer. A token typed into the console never leaves for another origin.
 */
function contentSecurityPolicy(html: string): string {
  const hashes = [...html.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
  );
  return [
    "default-src 'self'",
    `script-src 'self' ${hashes.join(' ')}`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

/**
 * `GET /acp/`: the web console (docs/console.md#the-web-console--get-acp), static ES modules read
 * once at start. Every file is known by name up front — a request names an entry of that map, never
 * a path on disk.
 */
export function registerConsole(app: FastifyInstance): void {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(STATIC_DIR)) {
    if (name !== 'index.html' && TYPES[extname(name)]) assets.set(name, asset(join(STATIC_DIR, name)));
  }
  for (const [name, path] of Object.entries(VENDOR)) assets.set(name, asset(path()));
  assets.set(VOCABULARY, asset(VOCABULARY, Buffer.from(vocabularyModule())));
  const index = asset(join(STATIC_DIR, 'index.html'));
  const csp = contentSecurityPolicy(index.body.toString('utf8'));

  const send = (
    request: { headers: Record<string, string | string[] | undefined> },
    reply: import('fastify').FastifyReply,
    a: Asset,
  ) => {
    reply
      .header('etag', a.etag)
      // Revalidate every time: a new release is seen at once, an unchanged file costs a 304.
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer');
    if (request.headers['if-none-match'] === a.etag) return reply.code(304).send();
    return reply.type(a.type).send(a.body);
  };

  app.get('/acp', (_request, reply) => reply.redirect('/acp/', 308));
  app.get('/acp/', (request, reply) => {
    reply.header('content-security-policy', csp).header('x-frame-options', 'DENY');
    return send(request, reply, index);
  });
  app.get<{ Params: { file: string } }>('/acp/assets/:file', (request, reply) => {
    const a = assets.get(request.params.file);
    if (a === undefined) throw new ApiError('resource.not_found', 'No such console asset.');
    return send(request, reply, a);
  });
}
