import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { acp } from './api.js';
import { ErrorLine, fmt, Loading, POLL_MS, SortTable, usePoll } from './ui.js';

const PAGE = 25;
const TARGET_TYPES = ['flow', 'stream', 'task', 'operator'];

/** A `datetime-local` value (this browser's time) as the UTC instant the API filters on. */
const toIso = (local) => (local ? new Date(local).toISOString() : undefined);

/** Who changed what (admin): newest first, filtered, paged by cursor; the first page polls. */
export function AuditPage() {
  const [form, setForm] = useState({
    operator: '',
    action: '',
    target_type: '',
    target_id: '',
    from: '',
    to: '',
  });
  const [filter, setFilter] = useState({});
  const [cursors, setCursors] = useState([undefined]);
  const cursor = cursors.at(-1);
  const [page, error] = usePoll(
    () => acp('/acp/audit/list', { filter, limit: PAGE, ...(cursor ? { cursor } : {}) }),
    // Later pages hold still: new rows arrive on the first page only.
    cursor ? 0 : POLL_MS,
    [JSON.stringify(filter), cursor],
  );
  const [updated, setUpdated] = useState(null);
  if (page && page !== updated?.page) setUpdated({ page, at: new Date().toISOString() });

  const set = (k) => (e) => setForm((f) => ({ ...f, [k]: e.currentTarget.value }));
  const apply = (e) => {
    e.preventDefault();
    const next = {};
    for (const k of ['operator', 'action', 'target_type', 'target_id'])
      if (form[k].trim()) next[k] = form[k].trim();
    if (form.from) next.from = toIso(form.from);
    if (form.to) next.to = toIso(form.to);
    setFilter(next);
    setCursors([undefined]);
  };
  const clear = () => {
    setForm({ operator: '', action: '', target_type: '', target_id: '', from: '', to: '' });
    setFilter({});
    setCursors([undefined]);
  };
  const columns = [
    { key: 'created_at', label: 'When', render: (r) => fmt.datetime(r.created_at) },
    { key: 'operator', label: 'Operator', render: (r) => html`<code>${r.operator}</code>` },
    { key: 'action', label: 'Action', render: (r) => html`<span class="badge">${r.action}</span>` },
    {
      key: 'target_id',
      label: 'Target',
      render: (r) => html`<span>${r.target_type} <code>${r.target_id}</code></span>`,
    },
    { key: 'request_id', label: 'Request', render: (r) => html`<code>${r.request_id}</code>` },
    { key: 'server_id', label: 'Node', render: (r) => html`<code>${r.server_id}</code>` },
  ];
  const field = (k, label, attrs = {}) => html`<div class="field">
    <label for=${`audit-${k}`}>${label}</label>
    <input id=${`audit-${k}`} name=${k} value=${form[k]} onInput=${set(k)} ...${attrs} />
  </div>`;
  return html`<section aria-label="Audit">
    <div class="page-head">
      <h2>Audit log</h2>
      <small class="muted" data-testid="audit-updated">${updated ? `updated ${fmt.time(updated.at)}` : ''}</small>
    </div>
    <form class="edit" onSubmit=${apply} aria-label="Audit filters">
      ${field('operator', 'Operator')}
      ${field('action', 'Action (e.g. flow.delete)')}
      <div class="field">
        <label for="audit-target_type">Target type</label>
        <select id="audit-target_type" name="target_type" value=${form.target_type} onChange=${set('target_type')}>
          <option value="">any</option>
          ${TARGET_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
      </div>
      ${field('target_id', 'Target id or name')}
      ${field('from', 'From (your time)', { type: 'datetime-local', step: 1 })}
      ${field('to', 'Until', { type: 'datetime-local', step: 1 })}
      <div class="actions">
        <button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${clear}>Clear</button>
      </div>
    </form>
    <${ErrorLine} error=${error} />
    ${
      page
        ? html`<${SortTable} label="Audit log" columns=${columns} rows=${page.items} rowKey=${(r) => r.id} />
          <div class="pager">
            <button type="button" class="secondary" onClick=${() => setCursors((c) => c.slice(0, -1))} disabled=${cursors.length < 2}>‹ Newer</button>
            <span>page ${cursors.length} · ${fmt.n(page.total)}${page.total_capped ? '+' : ''} in all</span>
            <button type="button" class="secondary" onClick=${() => setCursors((c) => [...c, page.next_cursor])} disabled=${!page.next_cursor}>Older ›</button>
          </div>`
        : html`<${Loading} error=${error} />`
    }
    <p class="hint">Every successful change over the ACP (flows, streams, task runs, operators) is kept here for a week; failed attempts are not.</p>
  </section>`;
}
