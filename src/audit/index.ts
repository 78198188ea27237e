export { AUDIT_KEEP_MS, AuditTrail } from './audit-trail.ts';
