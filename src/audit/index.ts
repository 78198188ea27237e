export {
  AUDIT_KEEP_MS,
  AUDIT_PRUNE_INTERVAL_MS,
  type AuditEvent,
  AuditTrail,
  type AuditTrailOptions,
} from './audit-trail.ts';
