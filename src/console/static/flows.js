import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { AcpError, acp, can, fieldErrors } from './api.js';
import { PostbackPanel } from './postback.js';
import { ErrorLine, fmt, Loading, POLL_MS, SortTable, usePoll } from './ui.js';

const PAGE = 20;

/** Keyset paging over a list endpoint: next by `next_cursor`, back by the cursors already seen. */
function usePaged(path, filter) {
  const [cursors, setCursors] = useState([undefined]);
  const [sort, setSortState] = useState(null);
  const cursor = cursors.at(-1);
  // Polled like every view with counters: clicks, hits and revenue move while the page is open.
  const [page, error, reload, updatedAt] = usePoll(
    () =>
      acp(path, {
        ...(filter ? { filter } : {}),
        ...(sort ? { sort: { by: sort.key, order: sort.desc ? 'desc' : 'asc' } } : {}),
        limit: PAGE,
        ...(cursor ? { cursor } : {}),
      }),
    POLL_MS,
    [path, JSON.stringify(filter), JSON.stringify(sort), cursor],
  );
  return {
    page,
    error,
    reload,
    updatedAt,
    /** The server sorts the whole list; a new order starts again at the first page. */
    sort,
    setSort: (next) => {
      setSortState(next);
      setCursors([undefined]);
    },
    index: cursors.length,
    next: page?.next_cursor ? () => setCursors((c) => [...c, page.next_cursor]) : null,
    prev: cursors.length > 1 ? () => setCursors((c) => c.slice(0, -1)) : null,
    first: () => setCursors([undefined]),
  };
}

function Pager({ paged }) {
  const { page, index, next, prev, updatedAt } = paged;
  if (!page) return null;
  return html`<div class="pager">
    <button type="button" class="secondary" onClick=${prev} disabled=${!prev}>‹ Previous</button>
    <span>page ${index} · ${fmt.n(page.total)} in all${updatedAt ? html` · <span data-testid="list-updated">updated ${fmt.time(new Date(updatedAt).toISOString())}</span>` : ''}</span>
    <button type="button" class="secondary" onClick=${next} disabled=${!next}>Next ›</button>
  </div>`;
}

/** One labelled form field with the API's validation message under it. */
function Field({ name, label, errors, children }) {
  const err = errors[name];
  return html`<div class=${`field ${err ? 'invalid' : ''}`}>
    <label for=${`f-${name}`}>${label}</label>
    ${children}
    ${err ? html`<span class="field-error" id=${`e-${name}`} data-field-error=${name}>${err}</span>` : ''}
  </div>`;
}

/**
 * A create/edit form driven by `fields`: [{name, label, type: text|number|select|countries, options}].
 * On save it sends only what changed (with `version` for an edit) and shows the API's field errors.
 */
function EditForm({ title, fields, initial, onSave, onCancel }) {
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (name) => (e) => setValues((v) => ({ ...v, [name]: e.currentTarget.value }));
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    setFailure(null);
    try {
      await onSave(values);
    } catch (err) {
      if (!(err instanceof AcpError)) throw err;
      const byField = fieldErrors(err);
      setErrors(byField);
      if (Object.keys(byField).length === 0 || byField._) setFailure(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="edit" onSubmit=${submit} aria-label=${title} novalidate>
    <h3>${title}</h3>
    ${fields.map(
      (f) => html`<${Field} key=${f.name} name=${f.name} label=${f.label} errors=${errors}>
        ${
          f.type === 'rules'
            ? html`<${RulesEditor} value=${values[f.name]} onChange=${(v) => setValues((x) => ({ ...x, [f.name]: v }))} />`
            : f.type === 'select'
              ? html`<select id=${`f-${f.name}`} name=${f.name} value=${values[f.name]} onChange=${set(f.name)}>
                ${f.options.map((o) => html`<option value=${o}>${o}</option>`)}
              </select>`
              : html`<input id=${`f-${f.name}`} name=${f.name} type=${f.type === 'number' ? 'number' : 'text'} step=${f.type === 'number' ? 'any' : undefined}
                value=${values[f.name]} onInput=${set(f.name)} placeholder=${f.placeholder ?? ''}
                aria-invalid=${errors[f.name] ? 'true' : undefined} aria-describedby=${errors[f.name] ? `e-${f.name}` : undefined} />`
        }
      <//>`,
    )}
    <${ErrorLine} error=${failure} />
    <div class="actions">
      <button type="submit" disabled=${busy}>Save</button>
      <button type="button" class="secondary" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`;
}

/** A delete button that asks once more in place (no browser dialog). */
function DeleteButton({ onDelete }) {
  const [armed, setArmed] = useState(false);
  return armed
    ? html`<button type="button" class="danger" onClick=${onDelete}>Confirm delete</button>
        <button type="button" class="secondary" onClick=${() => setArmed(false)}>Keep</button>`
    : html`<button type="button" class="secondary" onClick=${() => setArmed(true)}>Delete</button>`;
}

/** Form values are strings; the API wants numbers, lists and only what changed. */
function toBody(fields, values, initial, id) {
  const body = {};
  for (const f of fields) {
    const raw = values[f.name];
    const v =
      f.type === 'number'
        ? raw === ''
          ? raw
          : Number(raw)
        : f.type === 'rules'
          ? rulesToApi(raw)
          : f.type === 'countries'
            ? String(raw)
                .split(/[\s,]+/)
                .filter(Boolean)
                .map((c) => c.toUpperCase())
            : f.name === 'redirect_code'
              ? Number(raw)
              : f.name === 'currency'
                ? String(raw).trim().toUpperCase()
                : f.bool
                  ? raw === 'true'
                  : raw;
    if (
      id === undefined ||
      JSON.stringify(v) !== JSON.stringify(f.toForm ? f.toForm(initial) : initial[f.name])
    ) {
      if (f.type === 'countries') body.filters = { ...body.filters, [f.name]: v };
      else if (f.type === 'rules') body.filters = { ...body.filters, ...v };
      else body[f.name] = v;
    }
  }
  // An edit of one part of the filters keeps the others: filters are replaced as a whole.
  if (id !== undefined && body.filters) {
    for (const f of fields.filter((x) => x.type === 'countries')) {
      body.filters[f.name] ??= String(values[f.name])
        .split(/[\s,]+/)
        .filter(Boolean)
        .map((c) => c.toUpperCase());
    }
    for (const f of fields.filter((x) => x.type === 'rules'))
      if (body.filters.rules === undefined) Object.assign(body.filters, rulesToApi(values[f.name]));
  }
  return body;
}

/**
 * Create, edit and delete over one paged list (`base`/create, /update, /delete): what is being
 * edited (`'new'` or a record), the last failed delete, and the calls; each success reloads the page.
 */
function useEditor(paged, base, fields) {
  const [editing, setEditing] = useState(null);
  const [failure, setFailure] = useState(null);
  const done = () => {
    setEditing(null);
    paged.reload();
  };
  /** Saves the form; `extra` goes with a create (a stream's `flow_id`). Returns the saved record. */
  const save = async (values, extra = {}) => {
    const saved =
      editing === 'new'
        ? await acp(`${base}/create`, { ...extra, ...toBody(fields, values, {}) })
        : await acp(`${base}/update`, {
            id: editing.id,
            version: editing.version,
            ...toBody(fields, values, editing, editing.id),
          });
    done();
    return saved;
  };
  /** Deletes a record; true when it is gone, else the failure is shown. */
  const remove = async (record) => {
    try {
      await acp(`${base}/delete`, { id: record.id });
      setFailure(null);
      done();
      return true;
    } catch (err) {
      setFailure(err);
      return false;
    }
  };
  return { editing, setEditing, failure, save, remove };
}

const FLOW_FIELDS = [
  { name: 'slug', label: 'Slug (a–z, 0–9, -)', type: 'text', placeholder: 'summer-sale' },
  { name: 'name', label: 'Name', type: 'text' },
  { name: 'status', label: 'Status', type: 'select', options: ['active', 'paused'] },
  { name: 'rotation', label: 'Rotation', type: 'select', options: ['position', 'weight'] },
  {
    name: 'forward_query',
    label: 'Forward the incoming query string to the target',
    type: 'select',
    options: ['false', 'true'],
    bool: true,
  },
  {
    name: 'bot_action',
    label: 'Bots: route (like people), block (404), stream (only streams whose rules accept bots)',
    type: 'select',
    options: ['route', 'block', 'stream'],
  },
  {
    name: 'timezone',
    label: 'Time zone of rules and caps (IANA name or offset)',
    type: 'text',
    placeholder: 'UTC',
  },
  { name: 'cost_per_click', label: 'Cost per click', type: 'number' },
  { name: 'currency', label: 'Currency (ISO 4217)', type: 'text', placeholder: 'USD' },
];
const STREAM_FIELDS = [
  { name: 'name', label: 'Name', type: 'text' },
  { name: 'type', label: 'Type', type: 'select', options: ['regular', 'forced', 'default'] },
  { name: 'position', label: 'Position', type: 'number' },
  { name: 'weight', label: 'Weight', type: 'number' },
  { name: 'status', label: 'Status', type: 'select', options: ['active', 'paused'] },
  { name: 'daily_cap', label: 'Daily cap (clicks a day in the flow time zone; 0: none)', type: 'number' },
  {
    name: 'countries_include',
    label: 'Countries included (e.g. DE, AT)',
    type: 'countries',
    toForm: (s) => s.filters?.countries_include ?? [],
  },
  {
    name: 'countries_exclude',
    label: 'Countries excluded',
    type: 'countries',
    toForm: (s) => s.filters?.countries_exclude ?? [],
  },
  {
    name: 'target_url',
    label: 'Target URL (macros such as {click_id} {sub1} {country} {param:NAME}: docs/routing.md)',
    type: 'text',
  },
  { name: 'redirect_code', label: 'Redirect code', type: 'select', options: ['302', '301', '303', '307'] },
  {
    name: 'redirect_mode',
    label: 'Redirect mode (meta_refresh and js answer a page that hides the referrer)',
    type: 'select',
    options: ['http', 'meta_refresh', 'js'],
  },
  {
    name: 'rules',
    label: 'Targeting rules',
    type: 'rules',
    toForm: (s) => ({
      logic: s.filters?.logic ?? 'and',
      rules: (s.filters?.rules ?? []).map((r) => ({ ...r, values: r.values.join(', ') })),
    }),
  },
];

/** Rule fields (docs/routing.md#rules) and what their values look like, for the editor's hints. */
const RULE_FIELDS = {
  country: 'DE, AT',
  device_type: 'mobile, tablet',
  os: 'iOS, Android',
  browser: 'Chrome, Safari',
  language: 'de, en',
  ip: '203.0.113.0/24, 2001:db8::/32',
  referrer_host: 'news.example, *.facebook.com',
  'param:': 'values, e.g. fb, ig',
  weekday: 'mon, tue, wed',
  hour: '9-17, 22-3',
  is_unique: 'true',
  is_bot: 'true',
};
const BOOLEAN_FIELDS = ['is_unique', 'is_bot'];
/** A boolean rule's value as the form holds it ('true' / 'false') for the API; anything else as typed, which the API refuses by name. */
const toBoolean = (x) => (/^true$/i.test(x) ? true : /^false$/i.test(x) ? false : x);

/** The form's rules (values as typed) as the API takes them. */
function rulesToApi(v) {
  const rules = (v?.rules ?? []).map((r) => ({
    field: r.field,
    op: r.op,
    values: String(r.values)
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean)
      .map((x) => (BOOLEAN_FIELDS.includes(r.field) ? toBoolean(x) : x)),
  }));
  return { logic: v?.logic ?? 'and', rules };
}

/** A rule list: field, is / is not, values; all or any of them. */
function RulesEditor({ value, onChange }) {
  const v = value && typeof value === 'object' ? value : { logic: 'and', rules: [] };
  const setRule = (i, patch) =>
    onChange({ ...v, rules: v.rules.map((r, j) => (j === i ? { ...r, ...patch } : r)) });
  const fieldOf = (r) => (r.field.startsWith('param:') ? 'param:' : r.field);
  return html`<div class="rules" id="f-rules" data-testid="rules-editor">
    ${
      v.rules.length > 1
        ? html`<label class="inline">Match
            <select aria-label="Rules logic" value=${v.logic} onChange=${(e) => onChange({ ...v, logic: e.currentTarget.value })}>
              <option value="and">all rules</option><option value="or">any rule</option>
            </select></label>`
        : ''
    }
    ${v.rules.map(
      (r, i) => html`<div class="rule" key=${i} data-testid=${`rule-${i}`}>
        <select aria-label=${`Rule ${i + 1} field`} value=${fieldOf(r)}
          onChange=${(e) => {
            const field = e.currentTarget.value;
            // A yes/no field is chosen from true/false, never typed: a typo there saved the opposite.
            const values = BOOLEAN_FIELDS.includes(field)
              ? 'true'
              : BOOLEAN_FIELDS.includes(r.field)
                ? ''
                : r.values;
            setRule(i, { field: field === 'param:' ? 'param:src' : field, values });
          }}>
          ${Object.keys(RULE_FIELDS).map((f) => html`<option value=${f}>${f === 'param:' ? 'query parameter' : f}</option>`)}
        </select>
        ${
          r.field.startsWith('param:')
            ? html`<input aria-label=${`Rule ${i + 1} parameter name`} value=${r.field.slice(6)} size="8"
                onInput=${(e) => setRule(i, { field: `param:${e.currentTarget.value}` })} />`
            : ''
        }
        <select aria-label=${`Rule ${i + 1} operator`} value=${r.op} onChange=${(e) => setRule(i, { op: e.currentTarget.value })}>
          <option value="is">is</option><option value="is_not">is not</option>
        </select>
        ${
          BOOLEAN_FIELDS.includes(r.field)
            ? html`<select aria-label=${`Rule ${i + 1} values`} value=${String(r.values).trim().toLowerCase() === 'false' ? 'false' : 'true'}
                onChange=${(e) => setRule(i, { values: e.currentTarget.value })}>
                <option value="true">true</option><option value="false">false</option>
              </select>`
            : html`<input aria-label=${`Rule ${i + 1} values`} value=${r.values} placeholder=${RULE_FIELDS[fieldOf(r)]}
                onInput=${(e) => setRule(i, { values: e.currentTarget.value })} />`
        }
        <button type="button" class="secondary" aria-label=${`Remove rule ${i + 1}`}
          onClick=${() => onChange({ ...v, rules: v.rules.filter((_, j) => j !== i) })}>✕</button>
      </div>`,
    )}
    <button type="button" class="secondary" onClick=${() => onChange({ ...v, rules: [...v.rules, { field: 'device_type', op: 'is', values: '' }] })}>Add rule</button>
    <p class="hint">Values separated by commas. A click with no value for a field (no country, no language) fails "is" and passes "is not".</p>
  </div>`;
}

/** Conversions (leads and sales) and revenue, per currency when mixed: flows and streams alike. */
const earnings = [
  { key: 'conversions', label: 'Conv.', num: true, render: (r) => fmt.n(r.conversions) },
  { key: 'revenue', label: 'Revenue', num: true, render: (r) => fmt.revenue(r.revenue) },
];

const formValues = (fields, record) =>
  Object.fromEntries(
    fields.map((f) => {
      const v = f.toForm ? f.toForm(record) : record[f.name];
      if (f.type === 'rules') return [f.name, v];
      return [f.name, Array.isArray(v) ? v.join(', ') : v === undefined || v === null ? '' : String(v)];
    }),
  );

function Streams({ flow, admin, config }) {
  const paged = usePaged('/acp/streams/list', { flow_id: flow.id });
  const { editing, setEditing, failure, save, remove } = useEditor(paged, '/acp/streams', STREAM_FIELDS);
  const columns = [
    { key: 'name', label: 'Stream', sort: (s) => s.name },
    { key: 'type', label: 'Type' },
    { key: 'position', label: 'Pos', num: true, sort: (s) => s.position },
    { key: 'weight', label: 'Weight', num: true },
    {
      key: 'daily_cap',
      label: 'Cap',
      num: true,
      render: (s) => {
        if (!s.daily_cap) return '–';
        if (typeof s.cap_today !== 'number') return `${fmt.n(s.daily_cap)}/day`;
        const reached = s.cap_today >= s.daily_cap;
        return html`<span class=${reached ? 'bad-text' : ''} data-testid=${`cap-${s.name}`} title="Clicks today in the flow's time zone, as this node counts them">${fmt.n(s.daily_cap)}/day · ${fmt.n(s.cap_today)} today${reached ? ' (reached)' : ''}</span>`;
      },
    },
    { key: 'status', label: 'Status' },
    {
      key: 'filters',
      label: 'Filters',
      render: (s) =>
        [
          s.filters?.countries_include?.length ? `only ${s.filters.countries_include.join(' ')}` : '',
          s.filters?.countries_exclude?.length ? `not ${s.filters.countries_exclude.join(' ')}` : '',
          ...(s.filters?.rules ?? []).map(
            (r) => `${r.field} ${r.op === 'is' ? 'is' : 'is not'} ${r.values.join(' ')}`,
          ),
        ]
          .filter(Boolean)
          .join(s.filters?.logic === 'or' ? ' or ' : '; ') || 'all',
    },
    {
      key: 'target_url',
      label: 'Target',
      render: (
        s,
      ) => html`<code class="clip" title=${s.target_url}>${s.redirect_mode && s.redirect_mode !== 'http' ? s.redirect_mode : s.redirect_code} ${s.target_url}</code>
        ${s.target_status === 'unreachable' ? html` <span class="badge bad" title=${s.target_error ?? ''}>unreachable</span>` : ''}`,
    },
    { key: 'hits', label: 'Hits', num: true, sort: (s) => s.hits, render: (s) => fmt.n(s.hits) },
    { key: 'uniques', label: 'Uniques', num: true, render: (s) => fmt.n(s.uniques ?? 0) },
    ...earnings,
    ...(admin
      ? [
          {
            key: 'actions',
            label: '',
            render: (s) => html`<div class="actions">
              <button type="button" class="secondary" onClick=${() => setEditing(s)}>Edit</button>
              <${DeleteButton} onDelete=${() => remove(s)} />
            </div>`,
          },
        ]
      : []),
  ];
  return html`<section class="panel" aria-label=${`Streams of ${flow.slug}`}>
    <header>
      <h3>Streams of <code>${flow.slug}</code></h3>
      ${admin && editing === null ? html`<button type="button" onClick=${() => setEditing('new')}>New stream</button>` : ''}
    </header>
    ${
      editing
        ? html`<${EditForm}
            key=${editing === 'new' ? 'new' : editing.id}
            title=${editing === 'new' ? 'New stream' : `Edit stream ${editing.name}`}
            fields=${STREAM_FIELDS}
            initial=${formValues(
              STREAM_FIELDS,
              editing === 'new'
                ? {
                    type: 'regular',
                    position: 0,
                    weight: 100,
                    status: 'active',
                    redirect_code: 302,
                    redirect_mode: 'http',
                    daily_cap: 0,
                  }
                : editing,
            )}
            onSave=${(values) => save(values, { flow_id: flow.id })}
            onCancel=${() => setEditing(null)}
          />`
        : ''
    }
    <${ErrorLine} error=${paged.error ?? failure} />
    ${
      paged.page && !paged.page.items.some((s) => s.type === 'default' && s.status === 'active')
        ? html`<p class="notice warn" data-testid="no-default-stream">No active default stream: ${
            config?.routing?.fallback_url
              ? html`a click no other stream takes goes to the node's fallback URL (<code>${config.routing.fallback_url}</code>),
                  not to an offer of this flow. Add a default stream to keep such clicks in the campaign.`
              : config
                ? 'a click no other stream takes is lost (answered 404). Add a default stream so unmatched clicks still go somewhere.'
                : "a click no other stream takes is lost (404, or the node's fallback URL). Add a default stream so unmatched clicks still go somewhere."
          }</p>`
        : ''
    }
    ${paged.page ? html`<${SortTable} label="Streams" columns=${columns} rows=${paged.page.items} rowKey=${(s) => s.id} sort=${paged.sort} onSort=${paged.setSort} />` : html`<${Loading} error=${paged.error} />`}
    <${Pager} paged=${paged} />
    <${PostbackPanel} flow=${flow} config=${config}
      streams=${paged.page && paged.page.items.length >= paged.page.total ? paged.page.items : null} />
    <${SimulatePanel} flow=${flow} />
  </section>`;
}

const UA_PRESETS = {
  'iPhone Safari':
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
  'Android Chrome':
    'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36',
  'Windows Chrome':
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36',
  'Mac Safari':
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15',
  'Facebook preview (bot)': 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)',
};

/**
 * "Test a click": where a click with these facts would go on this flow, and why
 * (docs/routing.md#simulator).
 */
function SimulatePanel({ flow }) {
  const [form, setForm] = useState({
    country: '',
    ua: UA_PRESETS['iPhone Safari'],
    language: '',
    ip: '',
    referrer: '',
    query: '',
    at: '',
  });
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const set = (k) => (e) => setForm((f) => ({ ...f, [k]: e.currentTarget.value }));
  const run = async (e) => {
    e.preventDefault();
    setError(null);
    const body = { slug: flow.slug, user_agent: form.ua };
    if (form.country) body.country = form.country.trim();
    if (form.language) body.language = form.language;
    if (form.ip) body.ip = form.ip.trim();
    if (form.referrer) body.referrer = form.referrer;
    if (form.query) body.query = form.query.replace(/^\?/, '');
    if (form.at) body.at = new Date(form.at).toISOString();
    try {
      setResult(await acp('/acp/routing/simulate', body));
    } catch (err) {
      setResult(null);
      setError(err);
    }
  };
  const input = (k, label, attrs = {}) =>
    html`<label>${label}<input name=${`sim-${k}`} value=${form[k]} onInput=${set(k)} ...${attrs} /></label>`;
  return html`<section class="panel simulate" aria-label="Test a click">
    <h3>Test a click</h3>
    <form class="sim" onSubmit=${run}>
      ${input('country', 'Country', { placeholder: 'DE', size: 4 })}
      <label>Device / user agent
        <select name="sim-preset" onChange=${(e) => setForm((f) => ({ ...f, ua: UA_PRESETS[e.currentTarget.value] ?? f.ua }))}>
          ${Object.keys(UA_PRESETS).map((k) => html`<option value=${k}>${k}</option>`)}
        </select>
      </label>
      ${input('ua', 'User agent')}
      ${input('language', 'Accept-Language', { placeholder: 'de-DE,de;q=0.9' })}
      ${input('ip', 'IP', { placeholder: '203.0.113.7' })}
      ${input('referrer', 'Referrer', { placeholder: 'https://m.facebook.com/' })}
      ${input('query', 'Query', { placeholder: 'sub1=ad7&src=fb' })}
      ${input('at', `Time (your browser's, ${Intl.DateTimeFormat().resolvedOptions().timeZone || 'local'})`, { type: 'datetime-local' })}
      <button type="submit">Test</button>
    </form>
    <${ErrorLine} error=${error} />
    ${
      result
        ? html`<div class="sim-result" data-testid="sim-result">
            <p><strong data-testid="sim-outcome">${result.outcome}</strong>
              ${result.stream ? html` → stream <strong data-testid="sim-stream">${result.stream.name}</strong> (${result.stream.type})` : ' — no stream'}
              ${result.location ? html`<br /><code class="location">${result.status} ${result.location}</code>` : ''}</p>
            ${result.reason ? html`<p data-testid="sim-reason">${result.reason}</p>` : ''}
            <p class="hint">Seen as: ${[result.click.country ?? 'no country', result.click.device_type, result.click.os, result.click.browser, result.click.language, result.click.is_bot ? 'bot' : 'person', result.click.is_unique ? 'unique' : 'not unique'].filter(Boolean).join(' · ')}${result.click.local ? html` · <span data-testid="sim-local">${result.click.local.weekday} ${String(result.click.local.hour).padStart(2, '0')}:xx in ${result.click.local.timezone}</span>` : ''}</p>
            <${SortTable} label="Decision trace" rowKey=${(s) => s.stream_id + s.reason} rows=${result.trace}
              columns=${[
                { key: 'name', label: 'Stream', render: (s) => s.name || '–' },
                { key: 'type', label: 'Type' },
                {
                  key: 'result',
                  label: 'Result',
                  render: (s) =>
                    html`<span class=${`badge ${s.result === 'pass' ? 'ok' : s.result === 'fail' ? 'bad' : ''}`}>${s.result}</span>`,
                },
                { key: 'reason', label: 'Why' },
              ]} />
          </div>`
        : ''
    }
  </section>`;
}

/** Flows with their streams: lists for everyone, create/edit/delete for admins. */
export function FlowsPage({ me }) {
  const admin = can(me.role, 'admin');
  const paged = usePaged('/acp/traffic-flows/list');
  const editor = useEditor(paged, '/acp/traffic-flows', FLOW_FIELDS);
  // Where lost clicks go (routing.fallback_url, docs/routing.md#fallback-url), from the node's
  // configuration.
  const [config] = usePoll(() => acp('/acp/system/config'), 0);
  const fallback = config?.routing?.fallback_url;
  const { editing, setEditing, failure } = editor;
  const [selected, setSelected] = useState(null);
  const save = async (values) => setSelected(await editor.save(values));
  const remove = async (f) => {
    if ((await editor.remove(f)) && selected?.id === f.id) setSelected(null);
  };
  const columns = [
    {
      key: 'slug',
      label: 'Slug',
      sort: (f) => f.slug,
      render: (f) =>
        html`<button type="button" class="link" onClick=${() => setSelected(f)}>${f.slug}</button>`,
    },
    { key: 'name', label: 'Name', sort: (f) => f.name },
    { key: 'status', label: 'Status' },
    { key: 'rotation', label: 'Rotation' },
    { key: 'clicks', label: 'Clicks', num: true, sort: (f) => f.clicks, render: (f) => fmt.n(f.clicks) },
    { key: 'uniques', label: 'Uniques', num: true, render: (f) => fmt.n(f.uniques ?? 0) },
    {
      key: 'no_match',
      label: 'No match',
      num: true,
      render: (f) => fmt.n(f.no_match),
    },
    { key: 'bots', label: 'Bots', num: true, render: (f) => fmt.n(f.bots ?? 0) },
    ...earnings,
    {
      key: 'go',
      label: 'Link',
      render: (f) => html`<a href=${`/go/${f.slug}`} data-testid=${`go-${f.slug}`}>/go/${f.slug}</a>
        · <a href=${`#/reports?flow=${encodeURIComponent(f.id)}`} data-testid=${`report-${f.slug}`}>report</a>`,
    },
    ...(admin
      ? [
          {
            key: 'actions',
            label: '',
            render: (f) => html`<div class="actions">
              <button type="button" class="secondary" onClick=${() => setEditing(f)}>Edit</button>
              <${DeleteButton} onDelete=${() => remove(f)} />
            </div>`,
          },
        ]
      : []),
  ];
  return html`<section aria-label="Flows and streams">
    <header class="page-head">
      <h2>Traffic flows</h2>
      ${admin && editing === null ? html`<button type="button" onClick=${() => setEditing('new')}>New flow</button>` : ''}
    </header>
    ${
      editing
        ? html`<${EditForm}
            key=${editing === 'new' ? 'new' : editing.id}
            title=${editing === 'new' ? 'New flow' : `Edit flow ${editing.slug}`}
            fields=${FLOW_FIELDS}
            initial=${formValues(
              FLOW_FIELDS,
              editing === 'new'
                ? {
                    status: 'active',
                    rotation: 'position',
                    forward_query: false,
                    bot_action: 'route',
                    timezone: 'UTC',
                    cost_per_click: 0,
                    currency: 'USD',
                  }
                : editing,
            )}
            onSave=${save}
            onCancel=${() => setEditing(null)}
          />`
        : ''
    }
    ${
      config
        ? html`<p class="hint" data-testid="fallback-url">${
            fallback
              ? html`A click no stream takes, or for an unknown slug, goes to <code>${fallback}</code> (<code>routing.fallback_url</code>).`
              : html`A click no stream takes, or for an unknown slug, is answered 404: set <code>routing.fallback_url</code> to send it somewhere.`
          }</p>`
        : ''
    }
    <${ErrorLine} error=${paged.error ?? failure} />
    ${
      paged.page && paged.page.total === 0
        ? html`<p class="notice" data-testid="no-flows">No traffic flows yet. ${admin ? 'Create one with New flow, then give it a default stream' : 'An admin creates them'} (or run <code>npm run seed-demo</code> for two demo flows).</p>`
        : ''
    }
    ${paged.page ? html`<${SortTable} label="Flows" columns=${columns} rows=${paged.page.items} rowKey=${(f) => f.id} sort=${paged.sort} onSort=${paged.setSort} rowClass=${(f) => (f.id === selected?.id ? 'selected' : '')} />` : html`<${Loading} error=${paged.error} />`}
    <${Pager} paged=${paged} />
    ${selected ? html`<${Streams} key=${selected.id} flow=${selected} admin=${admin} config=${config} />` : html`<p class="hint">Pick a flow's slug to see its streams.</p>`}
  </section>`;
}
