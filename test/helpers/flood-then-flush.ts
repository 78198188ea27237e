/**
 * A child for test/telemetry/logger.test.ts: logs more than a pipe holds to stdout (the node's own
 * destination), then flushes for an exit as a forced stop does, then exits 7. A parent that never
 * reads the pipe shows whether the flush gives up.
 */
import { createLogger, flushLogSync } from '../../src/telemetry/index.ts';

const logger = createLogger({ level: 'info', name: 'sluice', serverId: 'flood' });
const line = 'x'.repeat(1000);
for (let i = 0; i < 1000; i++) logger.info({ i, line }, 'flood');
process.stderr.write('flushing\n');
flushLogSync(logger);
process.exit(7);
