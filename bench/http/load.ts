/**
 * Shared load harness: start variants in child processes, drive them with autocannon on loopback,
 * alternate them over rounds in one run, and report medians of req/s, p99 latency and the
 * server's CPU-µs per request.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { resolve } from 'node:path';
import autocannon from 'autocannon';

export interface Variant {
  name: string;
  child: string;
  path: string;
}

interface Running {
  v: Variant;
  proc: ChildProcess;
  port: number;
}

async function spawnVariant(v: Variant): Promise<Running> {
  const proc = fork(resolve(import.meta.dirname, 'server-child.ts'), [v.child], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((res) => proc.once('message', (m: { port: number }) => res(m.port)));
  return { v, proc, port };
}

const cpuOf = (p: ChildProcess) =>
  new Promise<number>((res) => {
    p.once('message', (m: { cpu: number }) => res(m.cpu));
    p.send('cpu');
  });

export interface Result {
  rps: number[];
  p99: number[];
  cpuPerReq: number[];
  non2xx3xx: number;
}

export async function compare(
  variants: Variant[],
  opts: { rounds: number; seconds: number; connections: number },
) {
  const running = [];
  for (const v of variants) running.push(await spawnVariant(v));
  const results = new Map<string, Result>(
    variants.map((v) => [v.name, { rps: [], p99: [], cpuPerReq: [], non2xx3xx: 0 }]),
  );
  const run = async (r: Running, seconds: number) => {
    const before = await cpuOf(r.proc);
    const out = await autocannon({
      url: `http://127.0.0.1:${r.port}${r.v.path}`,
      connections: opts.connections,
      duration: seconds,
      pipelining: 1,
    });
    const after = await cpuOf(r.proc);
    return { out, cpu: after - before };
  };
  for (const r of running) await run(r, 1); // warm-up
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? running : [...running].reverse();
    for (const r of order) {
      const { out, cpu } = await run(r, opts.seconds);
      const res = results.get(r.v.name)!;
      const total = out.requests.total;
      res.rps.push(out.requests.average);
      res.p99.push(out.latency.p99);
      res.cpuPerReq.push(cpu / Math.max(total, 1));
      // 2xx and 3xx are the expected answers (3xx: the redirects); anything else would taint the figure.
      res.non2xx3xx += out['4xx'] + out['5xx'] + out.errors + out.timeouts;
    }
  }
  for (const r of running) r.proc.kill();
  return results;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export function report(title: string, results: Map<string, Result>, base: string): void {
  console.log(title);
  const b = results.get(base)!;
  for (const [name, r] of results) {
    console.log(
      `  ${name.padEnd(26)} ${median(r.rps).toFixed(0).padStart(7)} req/s  p99 ${median(r.p99).toFixed(1).padStart(5)} ms  ` +
        `${median(r.cpuPerReq).toFixed(1).padStart(6)} server CPU-µs/req   req/s ratio ${(median(r.rps) / median(b.rps)).toFixed(3)}  ` +
        `CPU ratio ${(median(r.cpuPerReq) / median(b.cpuPerReq)).toFixed(3)}${r.non2xx3xx ? `  (${r.non2xx3xx} unexpected answers!)` : ''}`,
    );
  }
}
