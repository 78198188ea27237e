#!/usr/bin/env node
/**
 * The `sluice` command's entry point. It turns on Node's module compile cache before anything else
 * is imported: the code V8 compiled (and the TypeScript Node stripped) on one start is reused on the
 * next, which halves the import of the node (about 300 → 150 ms on this project's machine;
 * bench/routing/cold-start.bench.ts). The cache lives under the OS temporary directory; where that
 * cannot be written, or with NODE_DISABLE_COMPILE_CACHE=1, Node quietly compiles as before.
 */
import { enableCompileCache } from 'node:module';
import { holdStopSignals } from './stop-signals.ts';

// A stop asked for while `sluice start` still loads its code is kept, not fatal (src/stop-signals.ts).
if (process.argv[2] === 'start') holdStopSignals();
enableCompileCache();
await import('./command.ts');
