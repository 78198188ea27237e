import type { SlugMiss } from '../telemetry/index.ts';

/** How many slugs are kept, the most recently asked for (a flood of random slugs churns them, no more). */
export const SLUG_MISSES_KEPT = 20;

/**
 * Requests for slugs that route nowhere: a typo in an ad's link or a paused campaign still being
 * paid for is answered 404 (or sent to `routing.fallback_url`) with no click and no flow counter
 * to show it; these counts and the last slugs asked for are where a buyer finds it (system
 * metrics `traffic_flows.unknown_slugs`, the console's Traffic card, procedure 6). Only slugs of
 * the slug pattern are kept by name; every miss is counted.
 */
export class SlugMisses {
  #unknown = 0;
  #paused = 0;
  #bots = 0;
  /** Insertion order is recency: a slug asked for again moves to the end. */
  readonly #recent = new Map<string, { count: number; paused: boolean; at: number }>();

  /** A request for a slug that routes nowhere; a bot's is counted apart (and never named). */
  note(slug: string | undefined, paused: boolean, now: number, bot = false): void {
    if (bot) {
      this.#bots++;
      return;
    }
    if (paused) this.#paused++;
    else this.#unknown++;
    if (slug === undefined) return;
    const seen = this.#recent.get(slug);
    if (seen !== undefined) this.#recent.delete(slug);
    else if (this.#recent.size >= SLUG_MISSES_KEPT) this.#recent.delete(this.#recent.keys().next().value!);
    this.#recent.set(slug, { count: (seen?.count ?? 0) + 1, paused, at: now });
  }

  /** Counts since start (people's unknown and paused, bots' apart), and the kept slugs, most recent first. */
  section(): { unknown: number; paused: number; bots: number; recent: SlugMiss[] } {
    const recent: SlugMiss[] = [];
    for (const [slug, m] of this.#recent)
      recent.push({
        slug,
        count: m.count,
        flow: m.paused ? 'paused' : 'unknown',
        last_seen_at: new Date(m.at).toISOString(),
      });
    return { unknown: this.#unknown, paused: this.#paused, bots: this.#bots, recent: recent.reverse() };
  }
}
