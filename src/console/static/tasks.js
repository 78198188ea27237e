import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { acp, can } from './api.js';
import { fetchProcedures, setTaskLevel, taskLevel, validLevel } from './procedures.js';
import { ErrorLine, fmt, Loading, POLL_MS, SortTable, usePoll } from './ui.js';

/** The last failed HTTP calls of one task (operator role), secrets already masked by the node. */
function HttpFailures({ task, onClose }) {
  const [data, error] = usePoll(() => acp('/acp/http-client/recent-failures', { task, limit: 20 }), 0, [
    task,
  ]);
  return html`<section class="panel" aria-label=${`HTTP failures of ${task}`}>
    <header><h3>Recent failed HTTP calls of <code>${task}</code></h3>
      <button type="button" class="link" onClick=${onClose}>Close</button></header>
    <${ErrorLine} error=${error} />
    ${
      data
        ? data.items.length === 0
          ? html`<p class="empty">No failed call kept in memory for this task.</p>`
          : html`<div class="table-wrap"><table>
              <thead><tr><th>At</th><th>Call</th><th>Result</th><th class="num">Attempt</th><th class="num">Took</th><th>Headers</th><th>Payload</th></tr></thead>
              <tbody>${data.items.map(
                (f) => html`<tr>
                  <td data-label="At">${fmt.time(f.at)}</td>
                  <td data-label="Call"><code>${f.method} ${f.url}</code></td>
                  <td data-label="Result" class="bad-text">${f.status ?? ''} ${f.error}</td>
                  <td data-label="Attempt" class="num">${f.attempt}</td>
                  <td data-label="Took" class="num">${fmt.ms(f.duration_ms)}</td>
                  <td data-label="Headers"><code>${Object.entries(f.request_headers)
                    .map(([k, v]) => `${k}: ${v}`)
                    .join('\n')}</code></td>
                  <td data-label="Payload"><code>${f.request_body ?? ''}</code></td>
                </tr>`,
              )}</tbody></table></div>`
        : html`<${Loading} error=${error} />`
    }
  </section>`;
}

/** Procedures 1–4 on one page: running tasks, rising failures, p95 against the level, leader scope. */
export function TasksPage({ me, live }) {
  const [level, setLevel] = useState(taskLevel(me));
  const [data, error, reload] = usePoll(
    () => Promise.all([acp('/acp/cron-tasks/list'), fetchProcedures(level)]),
    POLL_MS,
    [level],
  );
  const [message, setMessage] = useState(null);
  const [failuresOf, setFailuresOf] = useState(null);
  // Drawn even before the first answer: a level the node refuses must stay fixable.
  const levelForm = html`<form class="inline" onSubmit=${(e) => e.preventDefault()}>
    <label for="level">Agreed p95 level (ms)</label>
    <input id="level" type="number" min="1" max="86400000" step="1" value=${level}
      onChange=${(e) => {
        const v = Number(e.currentTarget.value);
        if (validLevel(v)) {
          setTaskLevel(v);
          setLevel(v);
        }
      }} />
  </form>`;
  if (!data)
    return html`<h2>Cron tasks</h2>${levelForm}<${ErrorLine} error=${error} /><${Loading} error=${error} />`;
  const [tasks, report] = data;
  const flagged = (key) =>
    new Set(
      report.procedures
        .find((p) => p.key === key)
        .items.filter((i) => i.finding)
        .map((i) => i.subject),
    );
  const rising = flagged('failure_rise');
  const slow = flagged('task_p95');
  const isLeader = live.metrics?.host?.is_leader === true;
  const leaderId = live.cluster?.leader_id;
  const operator = can(me.role, 'operator');

  const runNow = async (name) => {
    try {
      const r = await acp('/acp/cron-tasks/run', { name });
      setMessage({ ok: true, text: `Started ${name} (run ${r.run_id}).` });
    } catch (err) {
      setMessage({ ok: false, text: `${name}: ${err.message}`, code: err.code });
    }
    reload();
  };
  const columns = [
    {
      key: 'name',
      label: 'Task',
      sort: (t) => t.name,
      render: (t) => html`<code>${t.name}</code> <small class="muted">${t.kind}</small>
        ${!t.enabled ? html` <span class="badge">disabled</span>` : ''}`,
    },
    {
      key: 'scope',
      label: 'Scope',
      render: (t) =>
        t.execution_scope === 'leader' && !isLeader
          ? html`<span class="badge warn" title="This node is a follower">leader · runs on ${leaderId ?? 'no leader'}</span>`
          : t.execution_scope,
    },
    {
      key: 'running',
      label: 'Running',
      sort: (t) => (t.runtime.running ? 1 : 0),
      render: (t) =>
        t.runtime.running
          ? html`<span class="badge ok">since ${fmt.since(t.runtime.running_since)}</span>`
          : '–',
    },
    {
      key: 'runs',
      label: 'Runs',
      num: true,
      sort: (t) => t.runtime.runs,
      render: (t) => fmt.n(t.runtime.runs),
    },
    {
      key: 'failures',
      label: 'Failures',
      num: true,
      sort: (t) => t.runtime.failures,
      render: (t) => fmt.n(t.runtime.failures),
    },
    {
      key: 'hours',
      label: 'Last h / prev h',
      num: true,
      sort: (t) => t.runtime.failures_last_hour,
      render: (t) => html`${t.runtime.failures_last_hour} / ${t.runtime.failures_prev_hour}
        ${rising.has(t.name) ? html` <span class="badge bad" data-testid="rise" title="Failures rose sharply over the previous hour">▲ rising</span>` : ''}`,
    },
    {
      key: 'p95',
      label: 'p95',
      num: true,
      sort: (t) => t.runtime.p95,
      render: (t) => html`<span class=${slow.has(t.name) ? 'bad-text' : ''}>${fmt.ms(t.runtime.p95)}</span>`,
    },
    {
      key: 'last_error',
      label: 'Last error',
      render: (t) =>
        t.runtime.last_error
          ? html`<span class="bad-text clip" title=${t.runtime.last_error}>${t.runtime.last_error}</span>`
          : '–',
    },
    { key: 'next', label: 'Next run', render: (t) => fmt.time(t.next_run_at) },
    ...(operator
      ? [
          {
            key: 'actions',
            label: '',
            render: (t) => html`<div class="actions">
              <button type="button" onClick=${() => runNow(t.name)} disabled=${t.runtime.running}>Run now</button>
              <button type="button" class="secondary" onClick=${() => setFailuresOf(t.name)}>HTTP failures</button>
            </div>`,
          },
        ]
      : []),
  ];
  return html`<section aria-label="Tasks">
    <h2>Cron tasks</h2>
    ${levelForm}
    ${!isLeader && tasks.items.some((t) => t.execution_scope === 'leader') ? html`<p class="notice">This node is a follower: leader-scoped tasks run on ${leaderId ?? 'no node (no leader!)'}.</p>` : ''}
    ${message ? html`<p class=${message.ok ? 'notice' : 'error'} role="status">${message.text}${message.code ? html` <code>${message.code}</code>` : ''}</p>` : ''}
    <${ErrorLine} error=${error} />
    <${SortTable}
      label="Tasks"
      columns=${columns}
      rows=${tasks.items}
      rowKey=${(t) => t.name}
      rowClass=${(t) => (rising.has(t.name) ? 'bad' : slow.has(t.name) ? 'warn' : '')}
    />
    ${failuresOf ? html`<${HttpFailures} task=${failuresOf} onClose=${() => setFailuresOf(null)} />` : ''}
  </section>`;
}
