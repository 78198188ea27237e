export type { LeaderElection } from './election.ts';
export { electionFromConfig } from './node-election.ts';
export { PostgresElection } from './postgres-election.ts';
