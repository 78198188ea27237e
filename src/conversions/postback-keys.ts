import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config/index.ts';
import { ApiError } from '../errors/index.ts';
import type { Storage } from '../storage/index.ts';
import type { Logger, PostbacksSection } from '../telemetry/index.ts';
import type { Clock } from '../time/index.ts';

/** The name the postback keys' hashes are kept under in the database (`deployment_secrets`). */
export const POSTBACK_KEY_SECRET = 'postback_key';
/** Prefix that makes a leaked postback key recognisable (as `slc_` does an ACP token). */
export const POSTBACK_KEY_PREFIX = 'pbk_';
/**
 * A key this node does not know is looked up in the database again, at most this often: a postback
 * with a key rotated on another node waits at most this long here for the read that finds it (and
 * is accepted), a wrong key waits as long for its 401, and a flood of wrong keys costs the database
 * one read a second. A known key is judged on hashes read at most this long before, else on a new
 * read: a key rotated out on another node is refused here within a second of its grace's end.
 */
export const KEY_REREAD_MS = 1000;
/** Replaced keys still within their grace at most: the oldest goes first. */
export const MAX_PREVIOUS_KEYS = 5;
/** Rotations that lose the race to another one are tried again this many times, then a 409. */
const ROTATE_ATTEMPTS = 5;

/** What the database keeps (JSON in `deployment_secrets.value`): hashes, never a key. */
interface StoredKeys {
  sha256: string;
  /** Keys replaced by a rotation, each accepted until its `until` (ISO). */
  previous: { sha256: string; until: string }[];
}

export interface PostbackKeysOptions {
  /** `postback.require_key`. */
  requireKey: boolean;
  /** `postback.key_sha256`: when set, it (and `previous_key_sha256`) are the keys, never the database's. */
  configuredSha256: string | undefined;
  /** `postback.previous_key_sha256`. */
  previousConfiguredSha256?: string | undefined;
  /** `postback.key_grace_hours`: how long a rotated-out key is still accepted. */
  graceHours: number;
  store: Pick<Storage, 'readSecret' | 'replaceSecret'>;
  clock: Clock;
  /** Told, at each start, that postbacks need no key. */
  logger?: Pick<Logger, 'warn'>;
}

/** 256 bits from the CSPRNG, base64url (URL-safe: it goes in a query string as it is). */
function generateKey(): string {
  return POSTBACK_KEY_PREFIX + randomBytes(32).toString('base64url');
}

const digest = (key: string) => createHash('sha256').update(key, 'utf8').digest();

const HEX64 = /^[0-9a-f]{64}$/i;

/** The stored value, or an error naming the row: only Sluice writes it. */
function parseStored(raw: string): StoredKeys {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    v = undefined;
  }
  const o = v as Partial<StoredKeys> | undefined;
  if (
    typeof o?.sha256 !== 'string' ||
    !HEX64.test(o.sha256) ||
    !Array.isArray(o.previous) ||
    !o.previous.every(
      (p) => typeof p?.sha256 === 'string' && HEX64.test(p.sha256) && typeof p.until === 'string',
    )
  )
    throw new Error(`deployment_secrets "${POSTBACK_KEY_SECRET}" is not a set of postback key hashes`);
  return { sha256: o.sha256, previous: o.previous };
}

/**
 * Which keys `/postback` accepts (docs/clicks.md#postback-keys). By default a key is required:
 * `postback.key_sha256`'s (and `previous_key_sha256`'s) when configured, else the one the first
 * node made and kept, hashed, in the database shared by every node (made race-safe: one
 * conditional insert wins), with the keys a rotation replaced while their grace lasts. Nodes hold
 * the hashes in memory; a key not among them, or a match on hashes older than
 * {@link KEY_REREAD_MS}, makes the node read the database again (a read that begins after the
 * postback arrived), at most once every {@link KEY_REREAD_MS}, so a key rotated on one node is
 * accepted on every other at once, its first postback there waiting up to that long, and a key
 * rotated out is refused on every node once its grace is over.
 * Keys are compared by their SHA-256 in constant time, against every hash each time.
 */
export class PostbackKeys {
  readonly #o: PostbackKeysOptions;
  /** The database's hashes as last read; undefined while none is stored (or not read yet). */
  #stored: StoredKeys | undefined;
  /** The raw value last read, what a rotation expects to replace. */
  #raw: string | undefined;
  /** When the last read began (real time, as the waits it sets are real). */
  #lastRead = Number.NEGATIVE_INFINITY;
  /** The next read, waiting out {@link KEY_REREAD_MS}: every miss until it begins joins it. */
  #next: Promise<void> | undefined;
  /** Bumped by every change of what is held: a read that began before one must not undo it. */
  #generation = 0;

  /** The keys as `postback` asks (docs/clicks.md, postbacks). */
  static fromConfig(
    config: Config,
    deps: Pick<PostbackKeysOptions, 'store' | 'clock' | 'logger'>,
  ): PostbackKeys {
    const p = config.postback;
    return new PostbackKeys({
      ...deps,
      requireKey: p.require_key,
      configuredSha256: p.key_sha256,
      previousConfiguredSha256: p.previous_key_sha256,
      graceHours: p.key_grace_hours,
    });
  }

  constructor(o: PostbackKeysOptions) {
    this.#o = o;
  }

  /** Whether a postback must carry a key: `require_key`, or a configured key whatever it says. */
  get required(): boolean {
    return this.#o.requireKey || this.#o.configuredSha256 !== undefined;
  }

  /** Whether the keys come from the configuration (a rotation over the ACP is refused then). */
  get configured(): boolean {
    return this.#o.configuredSha256 !== undefined;
  }

  section(): PostbacksSection {
    return {
      key_required: this.required,
      key_source: this.configured
        ? 'configured'
        : this.required && this.#stored !== undefined
          ? 'stored'
          : 'none',
    };
  }

  /**
   * Reads the stored hashes (before the node serves, so a restarted node knows them at once), and
   * warns when postbacks need no key: at every start, as long as that is so.
   */
  async start(): Promise<void> {
    if (!this.required)
      this.#o.logger?.warn(
        { key: 'postback.require_key' },
        'postbacks need no key: anyone who sees a click id can post conversions (postback.require_key: false)',
      );
    if (!this.configured) await this.#reread();
  }

  /**
   * When a key is required and none is configured or stored, makes one and stores its hash: the
   * key itself, to be shown once, when this node's insert won; undefined otherwise (one was there,
   * or another node starting at the same moment stored its own first: that node shows it).
   */
  async ensure(): Promise<string | undefined> {
    if (!this.#o.requireKey || this.configured || this.#stored !== undefined) return undefined;
    const key = generateKey();
    const value: StoredKeys = { sha256: digest(key).toString('hex'), previous: [] };
    const raw = JSON.stringify(value);
    if (await this.#o.store.replaceSecret(POSTBACK_KEY_SECRET, null, raw)) {
      this.#set(raw, value);
      return key;
    }
    await this.#reread();
    return undefined;
  }

  /**
   * Whether a postback with this `key` (undefined: none sent) is accepted. A key this node does not
   * know waits for a read of the database that begins after it arrived (a rotation made on another
   * node), at most {@link KEY_REREAD_MS}; so does a key it knows from hashes read longer ago than
   * that (another node may have replaced it since: once its grace is over it must be refused here
   * too). A database that cannot be read then throws (the postback is not stored).
   */
  async accepts(key: string | undefined): Promise<boolean> {
    if (!this.required) return true;
    if (key === undefined) return false;
    const given = digest(key);
    if (this.configured) return this.#matches(given);
    // A match on hashes read long ago may be a key another node has rotated out since (its grace
    // over, or none): judged again on a read that begins now, at most one a second (shared).
    if (this.#matches(given) && performance.now() - this.#lastRead < KEY_REREAD_MS) return true;
    await this.#nextRead();
    return this.#matches(given);
  }

  /**
   * Makes a new key and stores its hash in place of the current one, which stays accepted for
   * `postback.key_grace_hours` (as do earlier ones still within theirs, up to
   * {@link MAX_PREVIOUS_KEYS}). Returns the key, shown once. A configured key is refused (409):
   * the configuration, not the database, says which key is right.
   */
  async rotate(): Promise<string> {
    if (this.configured)
      throw new ApiError(
        'resource.conflict',
        'The postback key is configured (postback.key_sha256): change it there, with postback.previous_key_sha256 for the key being replaced.',
      );
    for (let attempt = 0; attempt < ROTATE_ATTEMPTS; attempt++) {
      const raw = await this.#o.store.readSecret(POSTBACK_KEY_SECRET);
      const current = raw === undefined ? undefined : parseStored(raw);
      const now = this.#o.clock.now();
      const graceMs = this.#o.graceHours * 3_600_000;
      const previous = current === undefined ? [] : current.previous.filter((p) => Date.parse(p.until) > now);
      if (current !== undefined && graceMs > 0)
        previous.push({ sha256: current.sha256, until: new Date(now + graceMs).toISOString() });
      const key = generateKey();
      const next: StoredKeys = {
        sha256: digest(key).toString('hex'),
        previous: previous.slice(-MAX_PREVIOUS_KEYS),
      };
      const nextRaw = JSON.stringify(next);
      if (await this.#o.store.replaceSecret(POSTBACK_KEY_SECRET, raw ?? null, nextRaw)) {
        this.#set(nextRaw, next);
        return key;
      }
    }
    throw new ApiError(
      'resource.conflict',
      'The postback key was being rotated by others meanwhile: try again.',
    );
  }

  /** Compares with every accepted hash, all of them each time (which one matched does not leak). */
  #matches(given: Buffer): boolean {
    const hashes: string[] = [];
    if (this.configured) {
      hashes.push(this.#o.configuredSha256!);
      if (this.#o.previousConfiguredSha256 !== undefined) hashes.push(this.#o.previousConfiguredSha256);
    } else if (this.#stored !== undefined) {
      const now = this.#o.clock.now();
      hashes.push(this.#stored.sha256);
      for (const p of this.#stored.previous) if (Date.parse(p.until) > now) hashes.push(p.sha256);
    }
    let ok = false;
    for (const h of hashes) ok = timingSafeEqual(given, Buffer.from(h, 'hex')) || ok;
    return ok;
  }

  /**
   * A read that has not begun yet: the one already waiting, or a new one, begun once
   * {@link KEY_REREAD_MS} has passed since the last began. Real time, not the injected clock: this
   * is how long a request is held.
   */
  #nextRead(): Promise<void> {
    this.#next ??= (async () => {
      // Always a pause, if only of a tick: #next is set before it is cleared.
      await sleep(Math.max(0, this.#lastRead + KEY_REREAD_MS - performance.now()), undefined, { ref: false });
      this.#next = undefined;
      await this.#reread();
    })();
    return this.#next;
  }

  /** Reads the stored hashes now. */
  async #reread(): Promise<void> {
    this.#lastRead = performance.now();
    const generation = this.#generation;
    const raw = await this.#o.store.readSecret(POSTBACK_KEY_SECRET);
    // A rotation this node made meanwhile is newer than what this read saw.
    if (raw !== undefined && raw !== this.#raw && generation === this.#generation)
      this.#set(raw, parseStored(raw));
  }

  #set(raw: string, value: StoredKeys): void {
    this.#generation++;
    this.#raw = raw;
    this.#stored = value;
  }
}
