import { ROLES } from '../config/index.ts';
import { DIMENSIONS } from '../reports/index.ts';

/**
 * `vocabulary.js`, a browser module made at start from the lists the API checks against, so the
 * console imports the server's words instead of retyping them: the roles in rank order (each is
 * allowed what the ones before it are) and the dimensions a report groups by.
 */
export function vocabularyModule(): string {
  return [
    '// Made by the node from its own lists (src/console/vocabulary.ts); not a file on disk.',
    `export const ROLES = ${JSON.stringify(ROLES)};`,
    `export const DIMENSIONS = ${JSON.stringify(DIMENSIONS)};`,
    '',
  ].join('\n');
}
