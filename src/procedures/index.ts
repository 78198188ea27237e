export {
  auditVersions,
  type CountryProbe,
  evaluate,
  type FailedCallView,
  type NodeReport,
  type NodeSnapshot,
  PROCEDURES,
  type ProcedureItem,
  type ProcedureResult,
  RISE_FACTOR,
  RISE_MIN_FAILURES,
  type TaskView,
} from './verdicts.ts';
