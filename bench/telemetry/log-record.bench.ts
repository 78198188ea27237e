/**
 * What one `api error` record costs to write: the node's root logger (`createLogger`, with the
 * redaction of REDACT_PATHS) against the same logger `unredacted`, on a stream that drops what it
 * gets (the cost of the destination's write is not in it). CPU time, medians over rounds.
 *
 *   node bench/telemetry/log-record.bench.ts
 */
import { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { createLogger, unredacted } from '../../src/telemetry/index.ts';
import { median } from '../_util.ts';

const N = 200_000;
const ROUNDS = 7;
const drop = new Writable({
  write(_chunk, _encoding, done) {
    done();
  },
});
const logger = createLogger({
  level: 'info',
  name: 'sluice',
  serverId: 'bench',
  destination: drop as unknown as DestinationStream,
});
const cases = { 'root logger (redacted)': logger, unredacted: unredacted(logger) };
const times = new Map<string, number[]>(Object.keys(cases).map((k) => [k, []]));
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const [name, log] of Object.entries(cases)) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < N; i++) {
      const id = `0d3a3667-fa9b-486b-8615-${i}`;
      log.error(
        {
          code: 'resource.not_found',
          http_status: 404,
          error: 'ApiError [resource.not_found]: No active traffic flow with that slug.',
          request_id: id,
          trace_id: id,
        },
        'api error',
      );
    }
    const used = process.cpuUsage(t0);
    if (r > 0) times.get(name)!.push(((used.user + used.system) * 1000) / N);
  }
}
for (const [name, xs] of times) console.log(`${name}: ${median(xs).toFixed(0)} CPU-ns a record (median)`);
