export { type LeaderElection, LocalElection } from './election.ts';
export { electionFromConfig } from './node-election.ts';
export { NodeHeartbeat } from './node-heartbeat.ts';
export { PostgresElection } from './postgres-election.ts';
