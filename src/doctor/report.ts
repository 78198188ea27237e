import { type Static, Type } from '@sinclair/typebox';
import { PROCEDURES } from '../procedures/index.ts';
import type { DoctorReport } from './doctor.ts';

const Item = Type.Object(
  {
    subject: Type.String(),
    message: Type.String(),
    finding: Type.Boolean(),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);
const Status = Type.Union([Type.Literal('ok'), Type.Literal('finding')]);
const Procedure = Type.Object(
  {
    id: Type.Integer({ minimum: 1, maximum: 7 }),
    key: Type.Union(PROCEDURES.map((p) => Type.Literal(p.key))),
    title: Type.String(),
    status: Status,
    summary: Type.String(),
    items: Type.Array(Item),
  },
  { additionalProperties: false },
);
const Nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Boolean>>(t: T) =>
  Type.Union([t, Type.Null()]);

/**
 * The shape of `sluice doctor --json` (docs/console.md#sluice-doctor), pinned by a test: scripts
 * may rely on it.
 */
export const DoctorReportSchema = Type.Object(
  {
    generated_at: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$' }),
    task_p95_ms: Type.Integer({ minimum: 1 }),
    client_error_rate: Type.Number({ minimum: 0, maximum: 1 }),
    healthy: Type.Boolean(),
    exit_code: Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)]),
    nodes: Type.Array(
      Type.Union([
        Type.Object(
          {
            url: Type.String(),
            reachable: Type.Literal(true),
            server_id: Nullable(Type.String()),
            is_leader: Nullable(Type.Boolean()),
            commit: Nullable(Type.String()),
            version: Nullable(Type.String()),
            findings: Type.Integer({ minimum: 0 }),
            procedures: Type.Array(Procedure, { minItems: 7, maxItems: 7 }),
          },
          { additionalProperties: false },
        ),
        Type.Object(
          { url: Type.String(), reachable: Type.Literal(false), error: Type.String() },
          { additionalProperties: false },
        ),
      ]),
      { minItems: 1 },
    ),
    version_audit: Type.Object(
      { status: Status, summary: Type.String(), items: Type.Array(Item) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type DoctorReportJson = Static<typeof DoctorReportSchema>;

const ANSI = {
  red: '\x1b[31m',
  green: '\x1b[32m',
  yellow: '\x1b[33m',
  dim: '\x1b[2m',
  bold: '\x1b[1m',
  off: '\x1b[0m',
};

/**
 * Text that came from a node (errors, URLs, upstream answers) without control characters: an
 * upstream must not be able to drive the operator's terminal with escape sequences.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const safe = (s: string) => s.replace(/[\u0000-\u001f\u007f-\u009f]/g, '�');

/** The report for a person: one line per procedure, its items below, colour only when asked. */
export function formatReport(r: DoctorReport, opts: { colour: boolean }): string {
  const c = (code: keyof typeof ANSI, s: string) => (opts.colour ? `${ANSI[code]}${s}${ANSI.off}` : s);
  const mark = (finding: boolean) => (finding ? c('red', '✗') : c('green', '✓'));
  const out: string[] = [];
  for (const n of r.nodes) {
    if (!n.reachable) {
      out.push(`${c('bold', safe(n.url))}`, `  ${c('red', '✗')} ${safe(n.error)}`, '');
      continue;
    }
    const role = n.is_leader === true ? 'leader' : n.is_leader === false ? 'follower' : 'role unknown';
    out.push(`${c('bold', safe(n.url))} ${c('dim', `node ${safe(n.server_id ?? '?')}, ${role}`)}`);
    for (const p of n.procedures) {
      out.push(
        `  ${mark(p.status === 'finding')} ${p.id}. ${p.title.padEnd(32)} ${p.status === 'ok' ? safe(p.summary) : ''}`.trimEnd(),
      );
      for (const i of p.items) {
        // Healthy checks of 6 and 7 are summed up in their line; other items are worth reading.
        if (p.status === 'ok' && (p.key === 'acp_health' || p.key === 'version_audit')) continue;
        const line = `      ${i.finding ? c('red', '•') : c('dim', '·')} ${safe(i.subject)}: ${safe(i.message)}`;
        out.push(i.finding ? line : c('dim', line));
        const calls =
          (i.data?.http_failures as
            | { at: string; method: string; url: string; status: number | null; error: string }[]
            | null) ?? [];
        for (const f of calls) {
          out.push(c('dim', safe(`          ${f.at} ${f.method} ${f.url} → ${f.status ?? f.error}`)));
        }
      }
    }
    out.push('');
  }
  out.push(`${mark(r.version_audit.status === 'finding')} Version audit: ${safe(r.version_audit.summary)}`);
  if (r.nodes.length > 1 || r.version_audit.status === 'finding') {
    for (const i of r.version_audit.items)
      out.push(`    ${i.finding ? c('red', '•') : '·'} ${safe(i.subject)}: ${safe(i.message)}`);
  }
  const verdict =
    r.exit_code === 0
      ? c('green', 'healthy')
      : r.exit_code === 1
        ? c('yellow', 'findings need attention')
        : c('red', 'a node could not be asked');
  out.push(
    '',
    `Verdict: ${verdict} (exit ${r.exit_code}; task p95 level ${r.task_p95_ms} ms, client-error rate ${r.client_error_rate})`,
    '',
  );
  return out.join('\n');
}
