import { html } from 'htm/preact';
import { fmt, Loading, SortTable } from './ui.js';

const recentServerErrors = (r) => r.recent?.server_errors ?? 0;
const recentClientErrors = (r) => (r.recent ? r.recent.errors - r.recent.server_errors : 0);

/**
 * Procedure 5's view: every controllers entry, sortable; 4xx apart from 5xx; the last five minutes
 * beside the totals. A row is red for a recent 5xx (the node failed) and amber for recent 4xx.
 */
export function RoutesPage({ live }) {
  const controllers = live.metrics?.controllers;
  if (!controllers) return html`<${Loading} error=${live.error ?? live.staleSince} />`;
  const rows = Object.entries(controllers).map(([route, e]) => ({ route, ...e }));
  const columns = [
    { key: 'route', label: 'Route', sort: (r) => r.route, render: (r) => html`<code>${r.route}</code>` },
    { key: 'count', label: 'Count', num: true, sort: (r) => r.count, render: (r) => fmt.n(r.count) },
    {
      key: 'server_errors',
      label: '5xx',
      num: true,
      sort: (r) => r.server_errors,
      render: (r) => fmt.n(r.server_errors),
    },
    {
      key: 'client_errors',
      label: '4xx',
      num: true,
      sort: (r) => r.client_errors,
      render: (r) => fmt.n(r.client_errors),
    },
    { key: 'avg_ms', label: 'Avg', num: true, sort: (r) => r.avg_ms, render: (r) => fmt.ms(r.avg_ms) },
    { key: 'p95_ms', label: 'p95', num: true, sort: (r) => r.p95_ms, render: (r) => fmt.ms(r.p95_ms) },
    {
      key: 'recent_count',
      label: '5 min',
      num: true,
      sort: (r) => r.recent?.count ?? 0,
      render: (r) => fmt.n(r.recent?.count ?? 0),
    },
    {
      key: 'recent_5xx',
      label: '5xx, 5 min',
      num: true,
      sort: recentServerErrors,
      render: (r) => fmt.n(recentServerErrors(r)),
    },
    {
      key: 'recent_4xx',
      label: '4xx, 5 min',
      num: true,
      sort: recentClientErrors,
      render: (r) => fmt.n(recentClientErrors(r)),
    },
    {
      key: 'recent_p95',
      label: 'p95, 5 min',
      num: true,
      sort: (r) => r.recent?.p95_ms ?? 0,
      render: (r) => fmt.ms(r.recent?.p95_ms ?? 0),
    },
  ];
  return html`<section aria-label="Routes">
    <h2>Routes</h2>
    <p class="hint">
      Totals since the node started, and the last five minutes. 5xx: this node failed; 4xx: the caller
      was wrong (a mistyped token, an unknown slug). Requests matching no route share <code>__unmatched__</code>.
    </p>
    <${SortTable}
      label="Controllers"
      columns=${columns}
      rows=${rows}
      initial=${{ key: 'count', desc: true }}
      rowKey=${(r) => r.route}
      rowClass=${(r) => (recentServerErrors(r) > 0 ? 'bad' : recentClientErrors(r) > 0 ? 'warn' : '')}
    />
  </section>`;
}
