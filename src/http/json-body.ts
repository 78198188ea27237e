import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/index.ts';

/**
 * The JSON body rules every route shares (docs/errors.md#codes, README.md "A quick tour"): an empty body counts as {},
 * prototype-poisoning keys are refused, bodies must be valid UTF-8 with no lone surrogate, and
 * every other media type with a body is refused with 415 before it is read.
 */
export function registerJsonBody(app: FastifyInstance): void {
  // Every other media type is refused with 415 (fastify would otherwise accept text/plain).
  // Bodies must be valid UTF-8: a lossy decode would quietly turn bad bytes into U+FFFD and store them.
  const strictJson = app.getDefaultJsonParser('error', 'error');
  // fastify's parser answers a poisoning key as "not valid JSON"; valid JSON refused for a key is
  // told as such (found by parsing again, on the refusal path only).
  const parseJson: typeof strictJson = (request, body, done) =>
    strictJson(request, body, (err, value) => {
      if (err === null || err === undefined) return done(err, value);
      try {
        JSON.parse(body as string);
      } catch {
        return done(err, undefined);
      }
      done(
        new ApiError(
          'validation.invalid_input',
          'The request body has a key that is never accepted (__proto__, or constructor with prototype).',
          { cause: err },
        ),
        undefined,
      );
    });
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, raw, done) => {
    let body: string;
    try {
      body = utf8.decode(raw as Buffer);
    } catch (err) {
      done(
        new ApiError('validation.invalid_input', 'The request body is not valid UTF-8.', { cause: err }),
        undefined,
      );
      return;
    }
    if (body.trim() === '') done(null, {});
    else if (!/\\u[dD][89a-fA-F]/.test(body)) parseJson(request, body, done);
    else {
      // A \uD800-style escape can still make a lone surrogate, which would be stored as U+FFFD.
      parseJson(request, body, (err, value) => {
        if (err || wellFormed(value)) done(err, value);
        else
          done(
            new ApiError(
              'validation.invalid_input',
              'The request body holds a lone surrogate (\\uD800–\\uDFFF).',
            ),
            undefined,
          );
      });
    }
  });

  // An empty body counts as {} whatever type it names (`fetch(url, {method: 'POST', body: ''})`
  // says text/plain); any other media type with a body is refused before the body is read.
  app.addContentTypeParser('*', (request, payload, done) => {
    // No route: the 404/405 answer does not depend on the body (left unread, as before).
    const length = request.headers['content-length'];
    if (request.is404) done(null, undefined);
    else if (length !== undefined)
      done(Number(length) === 0 ? null : new ApiError('request.unsupported_media_type'), {});
    else {
      // Chunked: empty when it ends before its first byte; refused at its first byte otherwise
      // (or when the client goes away first).
      const settle = (err: ApiError | null) => {
        payload.off('data', refuse);
        payload.off('error', refuse);
        payload.off('end', empty);
        payload.pause();
        done(err, err ? undefined : {});
      };
      const refuse = () => settle(new ApiError('request.unsupported_media_type'));
      const empty = () => settle(null);
      payload.on('data', refuse);
      payload.on('error', refuse);
      payload.on('end', empty);
    }
  });
}

/** True when every string (keys included) in a parsed JSON value is well-formed UTF-16. */
function wellFormed(value: unknown): boolean {
  // Iterative: a body may nest tens of thousands of levels deep.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!v.isWellFormed()) return false;
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if (!k.isWellFormed()) return false;
        stack.push(x);
      }
    }
  }
  return true;
}
