export { type DoctorReport, runDoctor } from './doctor.ts';
export { DoctorReportSchema, formatReport } from './report.ts';
