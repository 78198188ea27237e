import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import { acp } from './api.js';

/**
 * Copies the text of `node` (a token, a URL to paste elsewhere); where the clipboard is refused (an
 * insecure origin, a denied permission) selects it for a manual copy. Returns what to tell the user.
 */
export async function copyText(node) {
  try {
    await navigator.clipboard.writeText(node.textContent);
    return 'Copied.';
  } catch {
    const range = document.createRange();
    range.selectNodeContents(node);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    return 'Selected: copy it with Ctrl+C / ⌘C.';
  }
}

/**
 * How often pages re-read what they show: every 5 s, or every N s in a tab opened as
 * `/acp/?poll=N` (whole seconds, 1–300; anything else keeps 5 s): a wall screen that wants 1 s, a
 * slow link that wants 60. docs/console.md.
 */
export const POLL_MS = pollSeconds(new URLSearchParams(location.search).get('poll')) * 1000;

function pollSeconds(asked) {
  const n = asked !== null && /^\d{1,3}$/.test(asked) ? Number(asked) : 0;
  return n >= 1 && n <= 300 ? n : 5;
}

/** An amount with two decimals at least and `digits` at most, and its currency when known. */
const amount = (v, currency, digits) =>
  typeof v === 'number'
    ? `${v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}${currency ? ` ${currency}` : ''}`
    : '–';

export const fmt = {
  n: (v) => (typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: 1 }) : '–'),
  ms: (v) => (typeof v === 'number' ? `${v.toLocaleString('en-US', { maximumFractionDigits: 1 })} ms` : '–'),
  pct: (v) => (typeof v === 'number' ? `${(v * 100).toFixed(1)} %` : '–'),
  bytes: (v) => (typeof v === 'number' ? `${(v / 1048576).toFixed(1)} MB` : '–'),
  duration(seconds) {
    if (typeof seconds !== 'number') return '–';
    const s = Math.floor(seconds);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s % 60}s` : `${s}s`;
  },
  time: (iso) => (iso ? new Date(iso).toLocaleTimeString('en-GB') : '–'),
  datetime: (iso) =>
    iso ? new Date(iso).toLocaleString('en-GB', { dateStyle: 'short', timeStyle: 'medium' }) : '–',
  /** An amount in its currency: two decimals at least, up to the six stored. */
  money: (v, currency) => amount(v, currency, 6),
  /** Money per click (EPC): four decimals at most, as a buyer reads it (2.9706, 0.0125). */
  perClick: (v, currency) => amount(v, currency, 4),
  /** Revenue per currency (`{USD: 12.5, EUR: 3}`): each currency apart, never added up. */
  revenue: (byCurrency) => {
    const parts = Object.entries(byCurrency ?? {}).map(([c, v]) => fmt.money(v, c));
    return parts.length ? parts.join(' · ') : '–';
  },
  since(iso, now = Date.now()) {
    return iso ? `${fmt.time(iso)} (${fmt.duration((now - Date.parse(iso)) / 1000)} ago)` : '–';
  },
};

/**
 * Calls `fn` now and every `ms` while mounted (and when `deps` change); returns [data, error,
 * reload, the time of the last answer].
 */
export function usePoll(fn, ms, deps = []) {
  const [state, setState] = useState({ data: null, error: null, at: null });
  const [tick, setTick] = useState(0);
  // Restarts when the caller's deps change (or on reload). Each run has its own liveness flag, so
  // an answer still in flight from a previous run (an old page, an old level) is dropped, never shown.
  useEffect(() => {
    let alive = true;
    let timer;
    const run = async () => {
      let failed = false;
      try {
        const data = await fn();
        if (alive) setState({ data, error: null, at: Date.now() });
      } catch (error) {
        failed = true;
        if (alive) setState((s) => ({ data: s.data, error, at: s.at }));
      }
      // A one-off read (ms 0: names for a list) that failed is tried again, or a page opened while
      // the database was down would show ids instead of names until reloaded.
      if (alive && (ms > 0 || failed)) timer = setTimeout(run, ms > 0 ? ms : POLL_MS);
    };
    run();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  return [state.data, state.error, () => setTick((t) => t + 1), state.at];
}

/** The first 500 flows (id, slug, currency...), read once: what pickers and lists name flows by. */
export function useFlowList() {
  const [flows] = usePoll(() => acp('/acp/traffic-flows/list', { limit: 500 }), 0, []);
  return flows?.items ?? [];
}

/**
 * Flow ids to slugs and stream ids to names for the lists (a click names its flow and stream by
 * id); the first 500 of each, read once; beyond, an id's first characters.
 */
export function useFlowNames() {
  const items = useFlowList();
  const [streams] = usePoll(() => acp('/acp/streams/list', { limit: 500 }), 0, []);
  const streamItems = streams?.items ?? [];
  return {
    items,
    name: (id) => items.find((f) => f.id === id)?.slug ?? (id ? id.slice(0, 8) : '–'),
    /** A stream's name; `–` for a click no stream took. */
    stream: (id) => (id ? (streamItems.find((x) => x.id === id)?.name ?? id.slice(0, 8)) : '–'),
    /** A flow's currency, which its clicks' cost is in; undefined for a flow not (or no longer) listed. */
    currency: (id) => items.find((f) => f.id === id)?.currency,
  };
}

/**
 * What stands where data will be: "Loading…" while the first read is on its way, nothing once it
 * failed (the error line beside it says why, and live reads try again by themselves).
 */
/** A parameter of the page's hash (`#/clicks?click=ID`, `#/reports?flow=ID`), or null. */
export const hashParam = (name) => new URLSearchParams(location.hash.split('?')[1] ?? '').get(name);

export const Loading = ({ error }) => (error ? null : html`<p>Loading…</p>`);

export const ErrorLine = ({ error }) =>
  error
    ? html`<p class="error" role="alert">
        ${error.message}${error.code && error.code !== 'network' ? html` (<code>${error.status ? `${error.status} ` : ''}${error.code}</code>)` : ''}
        ${error.requestId ? html` <small>request ${error.requestId}</small>` : ''}
      </p>`
    : null;

/**
 * A table sortable by the columns that say so. `columns`: [{key, label, sort?: (row) => value,
 * render?: (row) => vnode, num?}]; `rowClass(row)` marks rows (errors, flags). With `onSort` the
 * sort is the caller's (a paged list sorted by the server: sorting one page would mislead): the
 * table shows `sort` and reports clicks, and keeps the rows in the order given.
 */
export function SortTable({ columns, rows, initial, rowClass, rowKey, label, sort: outer, onSort, footer }) {
  const [inner, setInner] = useState(initial ?? null);
  const sort = onSort ? outer : inner;
  const setSort = onSort ? (next) => onSort(next(sort)) : setInner;
  const col = columns.find((c) => c.key === sort?.key);
  const sorted =
    col?.sort && !onSort
      ? [...rows].sort((a, b) => {
          const x = col.sort(a);
          const y = col.sort(b);
          return (x < y ? -1 : x > y ? 1 : 0) * (sort.desc ? -1 : 1);
        })
      : rows;
  const toggle = (c) => setSort((s) => ({ key: c.key, desc: s?.key === c.key ? !s.desc : true }));
  const sortable = columns.filter((c) => c.sort);
  // On a phone the header row is hidden (rows become cards): the same order is picked here.
  const phoneSort =
    sortable.length === 0
      ? ''
      : html`<label class="phone-sort">Sort
          <select aria-label=${`Sort ${label ?? 'table'}`} value=${sort ? `${sort.key}:${sort.desc ? 'desc' : 'asc'}` : ''}
            onChange=${(e) => {
              const [key, dir] = e.currentTarget.value.split(':');
              setSort(() => (key ? { key, desc: dir === 'desc' } : null));
            }}>
            ${sort ? '' : html`<option value="">as listed</option>`}
            ${sortable.map(
              (c) =>
                html`<option value=${`${c.key}:desc`}>${c.label} ▾</option><option value=${`${c.key}:asc`}>${c.label} ▴</option>`,
            )}
          </select></label>`;
  return html`<div class="table-wrap">
    ${phoneSort}
    <table aria-label=${label}>
      <thead>
        <tr>
          ${columns.map(
            (c) =>
              html`<th class=${c.num ? 'num' : ''} aria-sort=${sort?.key === c.key ? (sort.desc ? 'descending' : 'ascending') : undefined}>
                ${
                  c.sort
                    ? html`<button type="button" class="sort" onClick=${() => toggle(c)}>
                        ${c.label}${sort?.key === c.key ? (sort.desc ? ' ▾' : ' ▴') : ''}
                      </button>`
                    : c.label
                }
              </th>`,
          )}
        </tr>
      </thead>
      <tbody>
        ${sorted.map(
          (r) =>
            html`<tr key=${rowKey(r)} class=${rowClass?.(r) ?? ''}>
              ${columns.map(
                (c) =>
                  html`<td class=${c.num ? 'num' : (c.className ?? '')} data-label=${c.label}>${c.render ? c.render(r) : r[c.key]}</td>`,
              )}
            </tr>`,
        )}
        ${sorted.length === 0 ? html`<tr><td colspan=${columns.length} class="empty">nothing here</td></tr>` : ''}
      </tbody>
      ${
        footer
          ? html`<tfoot><tr>${columns.map(
              (c) =>
                html`<td class=${c.num ? 'num' : (c.className ?? '')} data-label=${c.label}>${footer[c.key]}</td>`,
            )}</tr></tfoot>`
          : ''
      }
    </table>
  </div>`;
}

export const Card = ({ title, children }) =>
  html`<section class="card"><h3>${title}</h3><dl>${children}</dl></section>`;
export const Row = ({ k, v }) => html`<dt>${k}</dt><dd>${v}</dd>`;

/** What a poll could not read again, shown as it was, and said so (never as current). */
export function AsOf({ at, what }) {
  if (!at) return null;
  return html`<p class="notice warn" data-testid="as-of" role="status">${what} could not be read again: as it was at ${fmt.time(new Date(at).toISOString())}, not current. Asking again every ${POLL_MS / 1000} s.</p>`;
}
