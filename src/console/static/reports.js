import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { acp, acpText } from './api.js';
import { Chart } from './overview.js';
import { ErrorLine, fmt, hashParam, SortTable, useFlowList } from './ui.js';
import { DIMENSIONS } from './vocabulary.js';

const KEYS = { flow: ['flow_slug'], stream: ['stream_name'] };
const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

/** `YYYY-MM-DD` of a date in the browser's zone, `days` from today. */
const dayOf = (days) => {
  const d = new Date();
  d.setDate(d.getDate() + days);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
};
const PRESETS = {
  today: () => [dayOf(0), dayOf(1)],
  yesterday: () => [dayOf(-1), dayOf(0)],
  'last 7 days': () => [dayOf(-6), dayOf(1)],
  'last 30 days': () => [dayOf(-29), dayOf(1)],
};

/** The flow the hash names (`#/reports?flow=ID`, a flow's **report** link), or '' for every flow. */
const flowInHash = () => hashParam('flow') ?? '';

const money = (v, currency) => (typeof v === 'number' ? fmt.money(v, currency ?? '') : '–');
const ratio = (v) => (typeof v === 'number' ? fmt.pct(v) : '–');

/**
 * Reports (docs/reports.md): what made money, by up to three dimensions, as a table, a chart and a
 * CSV.
 */
export function ReportsPage() {
  const [preset, setPreset] = useState('last 7 days');
  const [range, setRange] = useState(PRESETS['last 7 days']());
  const [groupBy, setGroupBy] = useState(() => ['day', flowInHash() ? 'country' : 'flow']);
  const [flowId, setFlowId] = useState(flowInHash);
  // The hash holds the flow: a link followed while the page is open (another flow's report, the
  // navigation's Reports) changes it, and a flow picked here is written back, so a reload or a
  // copied address shows the same flow. Written in place: picking is not a step of the history.
  useEffect(() => {
    const onHash = () => {
      if (location.hash.startsWith('#/reports')) setFlowId(flowInHash());
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  const pickFlow = (id) => {
    setFlowId(id);
    history.replaceState(history.state, '', id ? `#/reports?flow=${encodeURIComponent(id)}` : '#/reports');
  };
  const [currency, setCurrency] = useState('');
  /** Whose clicks: everyone's, people's only or bots' only (`filter.is_bot`); conversions follow their click. */
  const [traffic, setTraffic] = useState('all');
  /** The flows to pick from. */
  const flows = useFlowList();
  /** The currencies the selection's money is in: several are never added up (money shows per currency). */
  const [currencies, setCurrencies] = useState([]);
  const [report, setReport] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const query = () => {
    const filter = {};
    if (flowId) filter.flow_id = flowId;
    if (currency) filter.currency = currency.toUpperCase();
    if (traffic !== 'all') filter.is_bot = traffic === 'bots';
    return {
      from: range[0],
      to: range[1],
      group_by: groupBy.filter(Boolean),
      timezone: ZONE,
      ...(Object.keys(filter).length ? { filter } : {}),
    };
  };
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      const q = query();
      const found = (await acp('/acp/reports/currencies', q)).currencies;
      setCurrencies(found);
      // A currency the selection no longer holds (another flow, another range) would narrow the
      // report to nothing: it is dropped, and the report runs again for all.
      if (currency && !found.includes(currency)) {
        setCurrency('');
        return;
      }
      setReport(await acp('/acp/reports/query', q));
    } catch (err) {
      setReport(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  // Runs on the first view and whenever the question changes.
  useEffect(() => {
    run();
  }, [range[0], range[1], groupBy.join(','), flowId, currency, traffic]);

  const download = async () => {
    try {
      const csv = await acpText('/acp/reports/query', { ...query(), format: 'csv', limit: 100000 });
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
      a.download = `sluice-report-${range[0]}-${range[1]}.csv`;
      a.click();
      URL.revokeObjectURL(a.href);
    } catch (err) {
      setError(err);
    }
  };

  const dims = groupBy.filter(Boolean);
  const cur = report?.currency;
  const columns = [
    ...dims.flatMap((d) =>
      (KEYS[d] ?? [d]).map((k) => ({
        key: k,
        label: d,
        sort: (r) => r[k] ?? '',
        // A dimension's value may be one long word (a 64-character slug, a sub-id): it wraps anywhere.
        className: 'long',
        render: (r) => r[k] ?? html`<span class="hint">none</span>`,
      })),
    ),
    ...['clicks', 'uniques', 'bots', 'no_match', 'conversions', 'leads', 'sales', 'rejected'].map((k) => ({
      key: k,
      label: k.replace('_', ' '),
      num: true,
      sort: (r) => r[k],
      render: (r) => fmt.n(r[k]),
    })),
    ...['revenue', 'cost', 'profit'].map((k) => ({
      key: k,
      label: k,
      num: true,
      sort: (r) => r[k] ?? -Infinity,
      render: (r) => money(r[k], cur),
    })),
    {
      key: 'epc',
      label: 'EPC',
      num: true,
      sort: (r) => r.epc ?? -Infinity,
      render: (r) => fmt.perClick(r.epc, cur ?? ''),
    },
    { key: 'cr', label: 'CR', num: true, sort: (r) => r.cr ?? -1, render: (r) => ratio(r.cr) },
    { key: 'roi', label: 'ROI', num: true, sort: (r) => r.roi ?? -Infinity, render: (r) => ratio(r.roi) },
  ];
  const totals = report
    ? { ...Object.fromEntries(dims.flatMap((d) => (KEYS[d] ?? [d]).map((k) => [k, '']))), ...report.totals }
    : null;
  if (totals && dims.length) totals[(KEYS[dims[0]] ?? [dims[0]])[0]] = 'Total';

  // Over time: clicks and conversions per day or hour, summed over the other dimensions.
  const time = dims.find((d) => d === 'hour' || d === 'day');
  let chart = null;
  if (report && time && report.rows.length) {
    const by = new Map();
    for (const r of report.rows) {
      const t = Date.parse(time === 'day' ? `${r.day}T00:00` : r.hour) / 1000;
      const e = by.get(t) ?? [0, 0];
      e[0] += r.clicks;
      e[1] += r.conversions;
      by.set(t, e);
    }
    // Every day (or hour) of the range on the axis, the quiet ones at zero: a single busy day is
    // still a line over the week, not a lone dot.
    const step = time === 'day' ? 86_400 : 3_600;
    const start = Date.parse(`${range[0]}T00:00`) / 1000;
    const end = Date.parse(`${range[1]}T00:00`) / 1000;
    const xs = [];
    for (let x = start; x < end && xs.length < 2000; x += step) xs.push(x);
    for (const x of by.keys()) if (!xs.includes(x)) xs.push(x);
    xs.sort((a, b) => a - b);
    chart = [xs, xs.map((x) => by.get(x)?.[0] ?? 0), xs.map((x) => by.get(x)?.[1] ?? 0)];
  }

  return html`<section aria-label="Reports">
    <header class="page-head"><h2>Reports</h2></header>
    <form class="filters report-form" onSubmit=${(e) => {
      e.preventDefault();
      run();
    }}>
      <label>Range
        <select name="preset" value=${preset} onChange=${(e) => {
          const p = e.currentTarget.value;
          setPreset(p);
          if (PRESETS[p]) setRange(PRESETS[p]());
        }}>
          ${[...Object.keys(PRESETS), 'custom'].map((p) => html`<option value=${p}>${p}</option>`)}
        </select>
      </label>
      ${
        preset === 'custom'
          ? html`<label>From <input type="date" name="from" value=${range[0]} onChange=${(e) => setRange([e.currentTarget.value, range[1]])} /></label>
              <label>To (excl.) <input type="date" name="to" value=${range[1]} onChange=${(e) => setRange([range[0], e.currentTarget.value])} /></label>`
          : ''
      }
      ${[0, 1, 2].map(
        (i) => html`<label>${i === 0 ? 'Group by' : 'then'}
          <select name=${`group-${i}`} value=${groupBy[i] ?? ''} onChange=${(e) => {
            const next = [...groupBy];
            const picked = e.currentTarget.value;
            // A dimension chosen in another place trades places with this one: never twice (a 400).
            const other = picked === '' ? -1 : next.indexOf(picked);
            if (other !== -1 && other !== i) next[other] = next[i] ?? '';
            next[i] = picked;
            setGroupBy(next.slice(0, 3));
          }}>
            <option value="">—</option>
            ${DIMENSIONS.map((d) => html`<option value=${d}>${d}</option>`)}
          </select></label>`,
      )}
      <label>Flow <select name="flow" value=${flowId} onChange=${(e) => pickFlow(e.currentTarget.value)}>
        <option value="">all flows</option>
        ${flows.map((f) => html`<option value=${f.id}>${f.slug}</option>`)}
        ${flowId && !flows.some((f) => f.id === flowId) ? html`<option value=${flowId}>${flowId}</option>` : ''}
      </select></label>
      <label>Traffic <select name="traffic" value=${traffic} onChange=${(e) => setTraffic(e.currentTarget.value)}>
        <option value="all">all clicks</option>
        <option value="people">people only</option>
        <option value="bots">bots only</option>
      </select></label>
      ${
        currencies.length > 1
          ? html`<label>Currency <select name="currency" value=${currency} onChange=${(e) => setCurrency(e.currentTarget.value)}>
              <option value="">all (counts only)</option>
              ${currencies.map((c) => html`<option value=${c}>${c}</option>`)}
            </select></label>`
          : html`<label>Currency <input name="currency" value=${currency} placeholder="all" size="4" onChange=${(e) => setCurrency(e.currentTarget.value.trim().toUpperCase())} /></label>`
      }
      <button type="submit" disabled=${busy}>Run</button>
      <button type="button" class="secondary" onClick=${download} data-testid="report-csv">CSV</button>
    </form>
    <p class="hint">Times in ${ZONE}. Clicks count at their time, conversions when the postback arrived${traffic === 'all' ? ' (a conversion on a bot click counts too: pick people only to leave those out)' : ''}. ${
      report
        ? html`<span data-testid="report-updated">Updated ${fmt.time(new Date().toISOString())} · ${report.total_rows} rows${report.truncated ? ` (the first ${report.rows.length} shown)` : ''}${report.currency ? ` · money in ${report.currency}` : ''}</span>`
        : ''
    }</p>
    ${
      currencies.length > 1 && !currency
        ? html`<p class="hint" data-testid="report-currencies">Money here is in ${currencies.join(', ')}, never added up: pick a currency to see it.</p>`
        : ''
    }
    <${ErrorLine} error=${error} />
    ${chart ? html`<${Chart} title=${`Clicks and conversions by ${time}`} series=${['clicks', 'conversions']} data=${chart} unit="" step=${time === 'day' ? 86_400 : 3_600} />` : ''}
    ${
      report
        ? html`<${SortTable} label="Report" columns=${columns} rows=${[...report.rows]} rowKey=${(r) => dims.map((d) => (KEYS[d] ?? [d]).map((k) => r[k])).join('|') || 'all'}
              footer=${Object.fromEntries(columns.map((c) => [c.key, c.render && totals[c.key] !== '' && totals[c.key] !== 'Total' ? c.render(totals) : totals[c.key]]))} />
            ${report.rows.length === 0 ? html`<p class="hint" data-testid="report-empty">No clicks or conversions in this range. Send traffic to a flow's /go link, or widen the range.</p>` : ''}`
        : busy
          ? html`<p>Loading…</p>`
          : ''
    }
  </section>`;
}
