export {
  DOCTOR_EXIT,
  type DoctorOptions,
  type DoctorReport,
  gather,
  runDoctor,
  UnreachableError,
} from './doctor.ts';
export {
  auditVersions,
  evaluate,
  type NodeReport,
  type NodeSnapshot,
  PROCEDURES,
  type ProcedureResult,
  RISE_FACTOR,
  RISE_MIN_FAILURES,
} from './procedures.ts';
export { DoctorReportSchema, formatReport } from './report.ts';
