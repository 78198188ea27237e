export { type LeaderElection, type LeadershipListener, LocalElection } from './election.ts';
export { PostgresElection, type PostgresElectionOptions } from './postgres-election.ts';
