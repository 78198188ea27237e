import { html } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { acp } from './api.js';
import {
  Card,
  ErrorLine,
  fmt,
  hashParam,
  Loading,
  POLL_MS,
  Row,
  SortTable,
  useFlowNames,
  usePoll,
} from './ui.js';

const PAGE = 50;
/** The most a live poll asks for; a burst beyond it reloads the first page instead. */
const LIVE_MAX = 500;
/**
 * How far back a live poll looks behind the newest row shown: a click is written up to a flush
 * interval late (a second by default, from any node), so a row may appear older than one already seen.
 */
const LIVE_OVERLAP_MS = 60_000;

/** Newest first by created_at, then by id as the server breaks ties (ASCII ids: code units = bytes). */
const newestFirst = (idOf) => (a, b) =>
  a.created_at === b.created_at
    ? idOf(a) < idOf(b)
      ? 1
      : idOf(a) > idOf(b)
        ? -1
        : 0
    : a.created_at < b.created_at
      ? 1
      : -1;

/**
 * A newest-first log list that stays live: the first page, older pages on "More" (keyset cursor),
 * and at every poll (`POLL_MS`) the rows created since the newest shown (less an overlap for late
 * writes) merged in by id, so new rows appear on top without losing the older pages already loaded.
 */
function useLiveLog(path, filter, idOf) {
  const [state, setState] = useState({ items: null, cursor: null, total: 0, capped: false });
  const [error, setError] = useState(null);
  const [updatedAt, setUpdatedAt] = useState(null);
  const [busy, setBusy] = useState(false);
  // "More" appends to the rows the poll merges into: it belongs to the effect's run.
  const more = useRef(null);
  const key = JSON.stringify(filter);

  useEffect(() => {
    let alive = true;
    let timer;
    let shown = null;
    const first = async () => {
      const page = await acp(path, { filter, limit: PAGE });
      shown = { items: page.items, cursor: page.next_cursor, total: page.total, capped: page.total_capped };
    };
    const poll = async () => {
      const newest = shown?.items[0];
      if (!newest) return first();
      const since = new Date(Date.parse(newest.created_at) - LIVE_OVERLAP_MS).toISOString();
      const from = filter.from && filter.from > since ? filter.from : since;
      // The total is the server's: rows the first page did not show, merged in below, are in it
      // already (counting them as new made a burst read 260 of 250).
      const [fresh, count] = await Promise.all([
        acp(path, { filter: { ...filter, from }, limit: LIVE_MAX }),
        acp(path, { filter, limit: 1 }),
      ]);
      if (fresh.next_cursor) return first();
      const byId = new Map(shown.items.map((r) => [idOf(r), r]));
      for (const r of fresh.items) byId.set(idOf(r), r);
      shown = {
        ...shown,
        items: [...byId.values()].sort(newestFirst(idOf)),
        total: count.total,
        capped: count.total_capped,
      };
    };
    const run = async (load) => {
      try {
        await load();
        if (!alive) return;
        setState(shown);
        setError(null);
        setUpdatedAt(new Date().toISOString());
      } catch (err) {
        if (alive) setError(err);
      }
      if (alive) timer = setTimeout(() => run(poll), POLL_MS);
    };
    setState({ items: null, cursor: null, total: 0, capped: false });
    run(first);
    more.current = async () => {
      if (!shown?.cursor) return;
      setBusy(true);
      try {
        const page = await acp(path, { filter, limit: PAGE, cursor: shown.cursor });
        if (!alive) return;
        const seen = new Set(shown.items.map(idOf));
        shown = {
          ...shown,
          items: [...shown.items, ...page.items.filter((r) => !seen.has(idOf(r)))],
          cursor: page.next_cursor,
        };
        setState(shown);
      } catch (err) {
        if (alive) setError(err);
      } finally {
        if (alive) setBusy(false);
      }
    };
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [path, key]);
  return { ...state, error, updatedAt, busy, more: () => more.current?.() };
}

/** The filter form: edited freely, applied on submit (typing does not query the node). */
function Filters({ fields, value, onApply, label }) {
  const [draft, setDraft] = useState(value);
  const set = (name) => (e) => setDraft((d) => ({ ...d, [name]: e.currentTarget.value }));
  const submit = (e) => {
    e.preventDefault();
    onApply(draft);
  };
  const reset = () => {
    setDraft({});
    onApply({});
  };
  return html`<form class="filters" aria-label=${label} onSubmit=${submit}>
    ${fields.map(
      (f) => html`<label key=${f.name}>
        <span>${f.label}</span>
        ${
          f.options
            ? html`<select name=${f.name} value=${draft[f.name] ?? ''} onChange=${set(f.name)}>
                <option value="">any</option>
                ${f.options.map(([v, text]) => html`<option value=${v}>${text}</option>`)}
              </select>`
            : html`<input name=${f.name} type=${f.type ?? 'text'} value=${draft[f.name] ?? ''} onInput=${set(f.name)}
                placeholder=${f.placeholder ?? ''} size=${f.size ?? 10} />`
        }
      </label>`,
    )}
    <div class="actions">
      <button type="submit">Apply</button>
      <button type="button" class="secondary" onClick=${reset}>Clear</button>
    </div>
  </form>`;
}

/** A day picked in the browser (its local midnight) as the API's instant; `to` days are inclusive. */
const dayStart = (day, plusDays = 0) => {
  if (!day) return undefined;
  const d = new Date(`${day}T00:00`);
  d.setDate(d.getDate() + plusDays);
  return d.toISOString();
};

/** The API filter of the form's values: empty fields left out, types as the API takes them. */
function toFilter(form) {
  const f = {};
  for (const [k, v] of Object.entries(form)) {
    if (v === '' || v === undefined) continue;
    if (k === 'is_bot') f.is_bot = v === 'true';
    else if (k === 'country') f.country = v.trim().toUpperCase();
    else if (k === 'from') f.from = dayStart(v);
    else if (k === 'to') f.to = dayStart(v, 1);
    else f[k] = v.trim();
  }
  return f;
}

function LiveLine({ log, noun }) {
  return html`<p class="live" aria-live="polite">
    ${log.error ? html`<span class="badge warn" data-testid="not-live">not live</span>` : html`<span class="badge ok">live</span>`}
    <span data-testid="list-updated">updated ${fmt.time(log.updatedAt)}</span>
    <span class="muted">· ${fmt.n(log.items?.length ?? 0)} shown of ${fmt.n(log.total)}${log.capped ? '+' : ''} ${noun}</span>
  </p>`;
}

function MoreButton({ log }) {
  return log.cursor
    ? html`<div class="pager"><button type="button" class="secondary" onClick=${log.more} disabled=${log.busy}>More</button></div>`
    : '';
}

const OUTCOME_BADGE = { redirect: 'ok', no_match: 'warn', bot: 'bad' };
const STATUS_BADGE = { sale: 'ok', lead: '', rejected: 'bad' };
const when = (iso) => html`<time datetime=${iso} title=${iso}>${fmt.datetime(iso)}</time>`;

const CONVERSION_COLUMNS = (flowName) => [
  { key: 'created_at', label: 'Time', render: (c) => when(c.created_at) },
  {
    key: 'status',
    label: 'Status',
    render: (c) => html`<span class=${`badge ${STATUS_BADGE[c.status] ?? ''}`}>${c.status}</span>`,
  },
  { key: 'payout', label: 'Payout', num: true, render: (c) => fmt.money(c.payout, c.currency) },
  { key: 'postbacks', label: 'Postbacks', num: true, render: (c) => fmt.n(c.postbacks) },
  { key: 'txid', label: 'Txid', render: (c) => (c.txid ? html`<code class="clip">${c.txid}</code>` : '–') },
  { key: 'flow_id', label: 'Flow', render: (c) => flowName(c.flow_id) },
];

/** One click, opened from the list or a link (`#/clicks?click=…`), with its conversions. */
function ClickDetail({ clickId, flowName, streamName, flowCurrency, onClose }) {
  const [data, error] = usePoll(() => acp('/acp/clicks/get', { click_id: clickId }), POLL_MS, [clickId]);
  const c = data?.click;
  const subs = c ? Object.entries(c).filter(([k, v]) => /^sub\d+$/.test(k) && v !== null) : [];
  return html`<section class="panel" aria-label=${`Click ${clickId}`}>
    <header>
      <h3>Click <code>${clickId}</code> ${c?.pending ? html`<span class="badge warn" title="still in the node's click log, written within a flush interval">pending</span>` : ''}</h3>
      <button type="button" class="secondary" onClick=${onClose}>Close</button>
    </header>
    <${ErrorLine} error=${error} />
    ${
      c
        ? html`<div class="cards">
            <${Card} title="Click">
              <${Row} k="Time" v=${when(c.created_at)} />
              <${Row} k="Flow" v=${flowName(c.flow_id)} />
              <${Row} k="Stream" v=${streamName(c.stream_id)} />
              <${Row} k="Outcome" v=${html`<span class=${`badge ${OUTCOME_BADGE[c.outcome]}`}>${c.outcome}</span>`} />
              <${Row} k="Unique" v=${c.is_unique ? 'yes' : 'no'} />
              <${Row} k="Bot" v=${c.is_bot ? 'yes' : 'no'} />
              <${Row} k="Cost" v=${fmt.money(c.cost, flowCurrency(c.flow_id) ?? '')} />
              <${Row} k="Node" v=${c.server_id ?? '–'} />
            <//>
            <${Card} title="Visitor">
              <${Row} k="Country" v=${c.country ?? '–'} />
              <${Row} k="Device" v=${c.device_type} />
              <${Row} k="OS / browser" v=${`${c.os || '–'} / ${c.browser || '–'}`} />
              <${Row} k="Language" v=${c.language ?? '–'} />
              <${Row} k="Referrer" v=${c.referrer_host ?? '–'} />
              <${Row} k="Address" v=${c.ip_prefix ?? '–'} />
            <//>
            <${Card} title="Sub-ids">
              ${subs.map(([k, v]) => html`<${Row} k=${k} v=${html`<code class="clip" title=${v}>${v}</code>`} />`)}
              ${subs.length ? '' : html`<${Row} k="none" v="" />`}
            <//>
          </div>
          <h3>Conversions (${data.conversions.length})</h3>
          <${SortTable} label="Conversions of the click" columns=${CONVERSION_COLUMNS(flowName)} rows=${data.conversions}
            rowKey=${(x) => x.conversion_id} />`
        : html`<${Loading} error=${error} />`
    }
  </section>`;
}

/** The `click` parameter of the page's hash (`#/clicks?click=ID`). */
const clickInHash = () => hashParam('click');

/** The click log, newest first and live; a click opens with its conversions. */
export function ClicksPage() {
  const flows = useFlowNames();
  const [form, setForm] = useState({});
  const filter = toFilter(form);
  const log = useLiveLog('/acp/clicks/list', filter, (c) => c.click_id);
  const opened = clickInHash();
  const open = (id) => {
    location.hash = `#/clicks?click=${encodeURIComponent(id)}`;
  };
  const columns = [
    { key: 'created_at', label: 'Time', render: (c) => when(c.created_at) },
    {
      key: 'click_id',
      label: 'Click',
      render: (c) =>
        html`<button type="button" class="link" onClick=${() => open(c.click_id)}><code>${c.click_id}</code></button>`,
    },
    { key: 'flow_id', label: 'Flow', render: (c) => flows.name(c.flow_id) },
    { key: 'stream_id', label: 'Stream', render: (c) => flows.stream(c.stream_id) },
    {
      key: 'outcome',
      label: 'Outcome',
      render: (c) => html`<span class=${`badge ${OUTCOME_BADGE[c.outcome]}`}>${c.outcome}</span>`,
    },
    { key: 'country', label: 'Country', render: (c) => c.country ?? '–' },
    {
      key: 'device',
      label: 'Device',
      render: (c) => `${c.device_type} · ${c.os || '–'} · ${c.browser || '–'}`,
    },
    { key: 'sub1', label: 'Sub1', render: (c) => (c.sub1 ? html`<code class="clip">${c.sub1}</code>` : '–') },
    { key: 'is_unique', label: 'Unique', render: (c) => (c.is_unique ? 'yes' : 'no') },
  ];
  const fields = [
    { name: 'flow_id', label: 'Flow', options: flows.items.map((f) => [f.id, f.slug]) },
    {
      name: 'outcome',
      label: 'Outcome',
      options: [
        ['redirect', 'redirect'],
        ['no_match', 'no match'],
        ['bot', 'bot'],
      ],
    },
    { name: 'country', label: 'Country', placeholder: 'DE', size: 3 },
    {
      name: 'is_bot',
      label: 'Bots',
      options: [
        ['false', 'humans'],
        ['true', 'bots'],
      ],
    },
    { name: 'sub1', label: 'Sub1' },
    { name: 'from', label: 'From', type: 'date' },
    { name: 'to', label: 'To (incl.)', type: 'date' },
  ];
  return html`<section aria-label="Clicks">
    <header class="page-head"><h2>Clicks</h2></header>
    ${
      opened
        ? html`<${ClickDetail} key=${opened} clickId=${opened} flowName=${flows.name} streamName=${flows.stream} flowCurrency=${flows.currency} onClose=${() => {
            location.hash = '#/clicks';
          }} />`
        : ''
    }
    <${Filters} label="Click filters" fields=${fields} value=${form} onApply=${setForm} />
    <${ErrorLine} error=${log.error} />
    ${
      log.items
        ? html`<${LiveLine} log=${log} noun="clicks" />
          <${SortTable} label="Clicks" columns=${columns} rows=${log.items} rowKey=${(c) => c.click_id}
            rowClass=${(c) => (c.click_id === opened ? 'selected' : c.is_bot ? 'muted' : '')} />
          <${MoreButton} log=${log} />`
        : html`<${Loading} error=${log.error} />`
    }
  </section>`;
}

/** Conversions, newest first and live, each linked to its click. */
export function ConversionsPage() {
  const flows = useFlowNames();
  const [form, setForm] = useState({});
  const filter = toFilter(form);
  const log = useLiveLog('/acp/conversions/list', filter, (c) => c.conversion_id);
  const columns = [
    ...CONVERSION_COLUMNS(flows.name),
    {
      key: 'click_id',
      label: 'Click',
      render: (c) =>
        html`<a href=${`#/clicks?click=${encodeURIComponent(c.click_id)}`}><code>${c.click_id}</code></a>`,
    },
    { key: 'country', label: 'Country', render: (c) => c.country ?? '–' },
  ];
  const fields = [
    { name: 'flow_id', label: 'Flow', options: flows.items.map((f) => [f.id, f.slug]) },
    {
      name: 'status',
      label: 'Status',
      options: [
        ['sale', 'sale'],
        ['lead', 'lead'],
        ['rejected', 'rejected'],
      ],
    },
    { name: 'from', label: 'From', type: 'date' },
    { name: 'to', label: 'To (incl.)', type: 'date' },
  ];
  return html`<section aria-label="Conversions">
    <header class="page-head"><h2>Conversions</h2></header>
    <${Filters} label="Conversion filters" fields=${fields} value=${form} onApply=${setForm} />
    <${ErrorLine} error=${log.error} />
    ${
      log.items
        ? html`<${LiveLine} log=${log} noun="conversions" />
          <${SortTable} label="Conversions" columns=${columns} rows=${log.items} rowKey=${(c) => c.conversion_id}
            rowClass=${(c) => (c.status === 'rejected' ? 'muted' : '')} />
          <${MoreButton} log=${log} />`
        : html`<${Loading} error=${log.error} />`
    }
  </section>`;
}
