import type { Outcome } from '../harness.ts';
import { crash } from './crash.ts';
import { dbOutage, hangingUpstream, leaderKill, sigterm } from './faults.ts';
import { load } from './load.ts';
import { memory } from './memory.ts';

export interface Scenario {
  /** Default length in seconds (the figures in docs/RELIABILITY.md). */
  seconds: number;
  run(o: { seconds: number; connections: number; realPg?: boolean }): Promise<Outcome>;
}

/** Every scenario of `npm run soak`, in the order it runs them. */
export const SCENARIOS: Record<string, Scenario> = {
  load: { seconds: 60, run: load },
  'db-outage': { seconds: 20, run: dbOutage },
  'leader-kill': { seconds: 0, run: leaderKill },
  sigterm: { seconds: 10, run: sigterm },
  'hanging-upstream': { seconds: 30, run: hangingUpstream },
  memory: { seconds: 600, run: memory },
  crash: { seconds: 10, run: crash },
};
