import { relative } from 'node:path';

/** What this reporter reads of the runner's events (node:test's reporter stream). */
interface RunnerEvent {
  type: string;
  data?: { file?: string; name?: string; nesting?: number; details?: { duration_ms?: number } };
}

/**
 * A node:test reporter (test/run.ts adds it beside `spec`) that writes one line per test file as
 * the file ends: its wall time in seconds, a tab, its path. Each file runs in its own process,
 * reported as a test named by its path; its `duration_ms` spans the process from start to exit.
 */
export default async function* fileDurations(events: AsyncIterable<RunnerEvent>): AsyncGenerator<string> {
  for await (const { type, data } of events) {
    if (type !== 'test:complete' || data?.nesting !== 0 || !data.file) continue;
    const file = relative(process.cwd(), data.file);
    if (data.name !== file) continue;
    yield `${((data.details?.duration_ms ?? 0) / 1000).toFixed(1)}\t${file}\n`;
  }
}
