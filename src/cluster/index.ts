export {
  type LeaderElection,
  type LeadershipListener,
  LocalElection,
  type LocalElectionOptions,
} from './election.ts';
export { NodeHeartbeat, type NodeHeartbeatOptions, type NodeIdentity } from './node-heartbeat.ts';
export { PostgresElection, type PostgresElectionOptions } from './postgres-election.ts';
