import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const BEARER = /^Bearer[ \t]+([\x21-\x7e]{1,512})[ \t]*$/i;
/** Prefix that makes a leaked Sluice token recognisable to secret scanners. */
export const TOKEN_PREFIX = 'slc_';

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function parseBearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1];
}

export function sha256(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

export function sha256Hex(token: string): string {
  return sha256(token).toString('hex');
}

/** 256 bits from the CSPRNG, base64url, with a recognisable prefix. */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

/** Constant-time comparison of a digest against a hex SHA-256. */
export function digestEquals(digest: Buffer, expectedHex: string): boolean {
  const expected = Buffer.from(expectedHex, 'hex');
  return expected.length === digest.length && timingSafeEqual(digest, expected);
}
