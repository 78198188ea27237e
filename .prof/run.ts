import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startNode } from '../src/main.ts';
import { seedDemo } from '../src/routing/index.ts';
const node = await startNode({ configDir: '/work/main/config', env: { APP__APP__SERVER__PORT: '18085', APP__STORAGE__SQLITE__PATH: '/tmp/tour/s5.db', APP__OBSERVABILITY__LOGGING__LEVEL: 'warn' }, print: () => {} });
await seedDemo(node.storage);
const { stdout: out } = await promisify(execFile)('wrk', ['-t1', '-c20', '-d10s', '-H', 'User-Agent: Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1', '-H', 'cf-ipcountry: FR', 'http://127.0.0.1:18085/go/demo?sub1=a']);
console.log(out.split('\n').filter((l) => /Requests\/sec/.test(l)).join('\n'));
await node.stop();
