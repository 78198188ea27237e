import {
  type ReportBounds,
  type ReportQuery,
  ReportQueryBody,
  reportCsv,
  reportCurrencies,
  runReport,
} from '../reports/index.ts';
import type { Storage } from '../storage/index.ts';
import type { Clock } from '../time/index.ts';
import type { AcpRouter } from './acp-router.ts';

/**
 * `POST /acp/reports/query` (viewer, docs/reports.md): the report as JSON, or as CSV (`format:
 * csv`, a header row, `text/csv`; `X-Report-Truncated` and `X-Report-Total-Rows` say whether
 * `limit` cut rows) that a spreadsheet opens with the same numbers. `POST /acp/reports/currencies`
 * (extension, viewer; the same body): `{currencies}` the selection's money is in, whatever
 * `filter.currency` says, so a client can offer one to pick: a report whose money is in several
 * counts everything but shows no money (its money figures are null).
 */
export function registerReportRoutes(
  acp: AcpRouter,
  deps: { storage: Storage; clock: Clock; clickRetentionDays: number; bounds: ReportBounds },
): void {
  acp.add({
    path: '/acp/reports/query',
    role: 'viewer',
    body: ReportQueryBody,
    handler: async ({ body, reply }) => {
      const q = body as ReportQuery;
      const report = await runReport(
        deps.storage,
        q,
        { retentionDays: deps.clickRetentionDays, now: deps.clock.now() },
        deps.bounds,
      );
      if (q.format !== 'csv') return report;
      reply.type('text/csv; charset=utf-8');
      reply.header('content-disposition', 'attachment; filename="sluice-report.csv"');
      // A CSV has no place for them beside its rows (a comment line is a row to a spreadsheet).
      reply.header('x-report-total-rows', String(report.total_rows));
      reply.header('x-report-truncated', String(report.truncated));
      return reportCsv(report, q.group_by ?? []);
    },
  });
  acp.add({
    path: '/acp/reports/currencies',
    role: 'viewer',
    body: ReportQueryBody,
    handler: async ({ body }) => ({
      currencies: await reportCurrencies(deps.storage, body as ReportQuery, deps.bounds),
    }),
  });
}
