import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { AcpError, acp, can, fieldErrors } from './api.js';
import { ErrorLine, fmt, SortTable, usePoll } from './ui.js';

const PAGE = 20;

/** Keyset paging over a list endpoint: next by `next_cursor`, back by the cursors already seen. */
function usePaged(path, filter) {
  const [cursors, setCursors] = useState([undefined]);
  const [sort, setSortState] = useState(null);
  const cursor = cursors.at(-1);
  const [page, error, reload] = usePoll(
    () =>
      acp(path, {
        ...(filter ? { filter } : {}),
        ...(sort ? { sort: { by: sort.key, order: sort.desc ? 'desc' : 'asc' } } : {}),
        limit: PAGE,
        ...(cursor ? { cursor } : {}),
      }),
    0,
    [path, JSON.stringify(filter), JSON.stringify(sort), cursor],
  );
  return {
    page,
    error,
    reload,
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
  const { page, index, next, prev } = paged;
  if (!page) return null;
  return html`<div class="pager">
    <button type="button" class="secondary" onClick=${prev} disabled=${!prev}>‹ Previous</button>
    <span>page ${index} · ${fmt.n(page.total)} in all</span>
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
          f.type === 'select'
            ? html`<select id=${`f-${f.name}`} name=${f.name} value=${values[f.name]} onChange=${set(f.name)}>
                ${f.options.map((o) => html`<option value=${o}>${o}</option>`)}
              </select>`
            : html`<input id=${`f-${f.name}`} name=${f.name} type=${f.type === 'number' ? 'number' : 'text'}
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
        : f.type === 'countries'
          ? String(raw)
              .split(/[\s,]+/)
              .filter(Boolean)
              .map((c) => c.toUpperCase())
          : f.name === 'redirect_code'
            ? Number(raw)
            : f.bool
              ? raw === 'true'
              : raw;
    if (
      id === undefined ||
      JSON.stringify(v) !== JSON.stringify(f.toForm ? f.toForm(initial) : initial[f.name])
    ) {
      if (f.type === 'countries') body.filters = { ...body.filters, [f.name]: v };
      else body[f.name] = v;
    }
  }
  // An edit of one country list keeps the other: filters are replaced as a whole.
  if (id !== undefined && body.filters) {
    for (const f of fields.filter((x) => x.type === 'countries')) {
      body.filters[f.name] ??= String(values[f.name])
        .split(/[\s,]+/)
        .filter(Boolean)
        .map((c) => c.toUpperCase());
    }
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
];
const STREAM_FIELDS = [
  { name: 'name', label: 'Name', type: 'text' },
  { name: 'type', label: 'Type', type: 'select', options: ['regular', 'forced', 'default'] },
  { name: 'position', label: 'Position', type: 'number' },
  { name: 'weight', label: 'Weight', type: 'number' },
  { name: 'status', label: 'Status', type: 'select', options: ['active', 'paused'] },
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
];

/** Conversions (leads and sales) and revenue, per currency when mixed: flows and streams alike. */
const earnings = [
  { key: 'conversions', label: 'Conv.', num: true, render: (r) => fmt.n(r.conversions) },
  { key: 'revenue', label: 'Revenue', num: true, render: (r) => fmt.revenue(r.revenue) },
];

const formValues = (fields, record) =>
  Object.fromEntries(
    fields.map((f) => {
      const v = f.toForm ? f.toForm(record) : record[f.name];
      return [f.name, Array.isArray(v) ? v.join(', ') : v === undefined || v === null ? '' : String(v)];
    }),
  );

function Streams({ flow, admin }) {
  const paged = usePaged('/acp/streams/list', { flow_id: flow.id });
  const { editing, setEditing, failure, save, remove } = useEditor(paged, '/acp/streams', STREAM_FIELDS);
  const columns = [
    { key: 'name', label: 'Stream', sort: (s) => s.name },
    { key: 'type', label: 'Type' },
    { key: 'position', label: 'Pos', num: true, sort: (s) => s.position },
    { key: 'weight', label: 'Weight', num: true },
    { key: 'status', label: 'Status' },
    {
      key: 'filters',
      label: 'Countries',
      render: (s) =>
        [
          s.filters?.countries_include?.length ? `only ${s.filters.countries_include.join(' ')}` : '',
          s.filters?.countries_exclude?.length ? `not ${s.filters.countries_exclude.join(' ')}` : '',
        ]
          .filter(Boolean)
          .join('; ') || 'all',
    },
    {
      key: 'target_url',
      label: 'Target',
      render: (s) => html`<code class="clip" title=${s.target_url}>${s.redirect_code} ${s.target_url}</code>
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
                ? { type: 'regular', position: 0, weight: 100, status: 'active', redirect_code: 302 }
                : editing,
            )}
            onSave=${(values) => save(values, { flow_id: flow.id })}
            onCancel=${() => setEditing(null)}
          />`
        : ''
    }
    <${ErrorLine} error=${paged.error ?? failure} />
    ${paged.page ? html`<${SortTable} label="Streams" columns=${columns} rows=${paged.page.items} rowKey=${(s) => s.id} sort=${paged.sort} onSort=${paged.setSort} />` : html`<p>Loading…</p>`}
    <${Pager} paged=${paged} />
  </section>`;
}

/** Flows with their streams: lists for everyone, create/edit/delete for admins. */
export function FlowsPage({ me }) {
  const admin = can(me.role, 'admin');
  const paged = usePaged('/acp/traffic-flows/list');
  const editor = useEditor(paged, '/acp/traffic-flows', FLOW_FIELDS);
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
      render: (f) => html`<a href=${`/go/${f.slug}`} data-testid=${`go-${f.slug}`}>/go/${f.slug}</a>`,
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
              editing === 'new' ? { status: 'active', rotation: 'position', forward_query: false } : editing,
            )}
            onSave=${save}
            onCancel=${() => setEditing(null)}
          />`
        : ''
    }
    <${ErrorLine} error=${paged.error ?? failure} />
    ${paged.page ? html`<${SortTable} label="Flows" columns=${columns} rows=${paged.page.items} rowKey=${(f) => f.id} sort=${paged.sort} onSort=${paged.setSort} rowClass=${(f) => (f.id === selected?.id ? 'selected' : '')} />` : html`<p>Loading…</p>`}
    <${Pager} paged=${paged} />
    ${selected ? html`<${Streams} key=${selected.id} flow=${selected} admin=${admin} />` : html`<p class="hint">Pick a flow's slug to see its streams.</p>`}
  </section>`;
}
