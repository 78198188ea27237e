import { html } from 'htm/preact';
import { fmt, SortTable } from './ui.js';

/** Procedure 5's view: every controllers entry, sortable, routes with errors highlighted. */
export function RoutesPage({ live }) {
  const controllers = live.metrics?.controllers;
  if (!controllers) return html`<p>Loading…</p>`;
  const rows = Object.entries(controllers).map(([route, e]) => ({ route, ...e }));
  const columns = [
    { key: 'route', label: 'Route', sort: (r) => r.route, render: (r) => html`<code>${r.route}</code>` },
    { key: 'count', label: 'Count', num: true, sort: (r) => r.count, render: (r) => fmt.n(r.count) },
    { key: 'errors', label: 'Errors', num: true, sort: (r) => r.errors, render: (r) => fmt.n(r.errors) },
    { key: 'avg_ms', label: 'Avg', num: true, sort: (r) => r.avg_ms, render: (r) => fmt.ms(r.avg_ms) },
    { key: 'p95_ms', label: 'p95', num: true, sort: (r) => r.p95_ms, render: (r) => fmt.ms(r.p95_ms) },
  ];
  return html`<section aria-label="Routes">
    <h2>Routes</h2>
    <p class="hint">Cumulative since the node started; requests matching no route share <code>__unmatched__</code>.</p>
    <${SortTable}
      label="Controllers"
      columns=${columns}
      rows=${rows}
      initial=${{ key: 'count', desc: true }}
      rowKey=${(r) => r.route}
      rowClass=${(r) => (r.errors > 0 ? 'bad' : '')}
    />
  </section>`;
}
