export { showFirstSecrets } from './first-secrets.ts';
export { generateServerId, listen } from './listen.ts';
export { NodeStop, type StopOutcome, type Unwritten, unwritten } from './stop.ts';
