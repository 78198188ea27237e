import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { acp } from './api.js';
import { copyText, ErrorLine, fmt, Loading, POLL_MS, SortTable, usePoll } from './ui.js';
import { ROLES } from './vocabulary.js';

/** The token of a new operator: shown here once, with a copy button; the node never shows it again. */
function NewToken({ created, onDone }) {
  const [copied, setCopied] = useState(null);
  const copy = async () => setCopied(await copyText(document.querySelector('[data-testid=new-token]')));
  return html`<section class="panel token-panel" aria-label="New token" role="status">
    <h3>Token of <code>${created.name}</code> (${created.role})</h3>
    <p class="warning"><strong>Copy this token now.</strong> It is shown only this once: the node
      keeps its hash, not the token. Whoever holds it acts as ${created.name}.</p>
    <code class="token" data-testid="new-token">${created.token}</code>
    <div class="actions">
      <button type="button" onClick=${copy}>Copy token</button>
      <button type="button" class="secondary" onClick=${onDone}>Done, I have stored it</button>
      ${copied ? html`<span class="muted">${copied}</span>` : ''}
    </div>
  </section>`;
}

/** A revoke button that asks once more in place, naming who loses access. */
function RevokeButton({ name, onRevoke }) {
  const [armed, setArmed] = useState(false);
  return armed
    ? html`<button type="button" class="danger" onClick=${onRevoke}>Revoke ${name}</button>
        <button type="button" class="secondary" onClick=${() => setArmed(false)}>Keep</button>`
    : html`<button type="button" class="secondary" onClick=${() => setArmed(true)}>Revoke</button>`;
}

/** Operators (admin): configured ones read-only, stored ones created with a one-time token and revoked. */
export function OperatorsPage({ me }) {
  const [showRevoked, setShowRevoked] = useState(false);
  const [data, error, reload] = usePoll(
    () => acp('/acp/operators/list', { include_revoked: showRevoked }),
    POLL_MS,
    [showRevoked],
  );
  const [name, setName] = useState('');
  const [role, setRole] = useState('viewer');
  const [created, setCreated] = useState(null);
  const [failure, setFailure] = useState(null);
  const [busy, setBusy] = useState(false);

  const create = async (e) => {
    e.preventDefault();
    setBusy(true);
    setFailure(null);
    try {
      setCreated(await acp('/acp/operators/create', { name: name.trim(), role }));
      setName('');
      reload();
    } catch (err) {
      setFailure(err);
    } finally {
      setBusy(false);
    }
  };
  const revoke = async (o) => {
    setFailure(null);
    try {
      await acp('/acp/operators/revoke', { name: o.name });
    } catch (err) {
      setFailure(err);
    }
    reload();
  };
  const columns = [
    { key: 'name', label: 'Name', sort: (o) => o.name, render: (o) => html`<code>${o.name}</code>` },
    { key: 'role', label: 'Role', sort: (o) => o.role },
    {
      key: 'source',
      label: 'Source',
      render: (o) =>
        o.source === 'config'
          ? html`<span class="badge" title="Listed in acp.operators: change it in the configuration">config · read-only</span>`
          : 'stored',
    },
    {
      key: 'created_at',
      label: 'Created',
      sort: (o) => o.created_at ?? '',
      render: (o) => fmt.datetime(o.created_at),
    },
    {
      key: 'state',
      label: 'State',
      render: (o) =>
        o.revoked_at
          ? html`<span class="badge bad">revoked ${fmt.datetime(o.revoked_at)}</span>`
          : html`<span class="badge ok">active</span>`,
    },
    {
      key: 'actions',
      label: '',
      // Active names are unique across the configuration and storage: the one named as you is you.
      render: (o) =>
        o.revoked_at
          ? ''
          : o.name === me.name
            ? html`<small class="muted">you</small>`
            : o.source === 'storage'
              ? html`<div class="actions"><${RevokeButton} name=${o.name} onRevoke=${() => revoke(o)} /></div>`
              : '',
    },
  ];
  return html`<section aria-label="Operators">
    <h2>Operators</h2>
    <form class="edit" onSubmit=${create} aria-label="New operator">
      <h3>New operator</h3>
      <div class="field">
        <label for="op-name">Name (A–Z, a–z, 0–9, . _ @ -)</label>
        <input id="op-name" name="name" required maxlength="64" value=${name} onInput=${(e) => setName(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="op-role">Role</label>
        <select id="op-role" name="role" value=${role} onChange=${(e) => setRole(e.currentTarget.value)}>
          ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
        </select>
      </div>
      <div class="actions"><button type="submit" disabled=${busy || name.trim() === ''}>Create</button></div>
    </form>
    ${created ? html`<${NewToken} created=${created} onDone=${() => setCreated(null)} />` : ''}
    <${ErrorLine} error=${failure ?? error} />
    <label class="check"><input type="checkbox" checked=${showRevoked} onChange=${(e) => setShowRevoked(e.currentTarget.checked)} /> Show revoked</label>
    ${
      data
        ? html`<${SortTable}
            label="Operators"
            columns=${columns}
            rows=${data.items}
            rowKey=${(o) => `${o.source}:${o.name}:${o.created_at ?? ''}`}
            rowClass=${(o) => (o.revoked_at ? 'muted-row' : '')}
          />`
        : html`<${Loading} error=${error} />`
    }
    <p class="hint">Operators from the configuration (<code>acp.operators</code>) are changed there. You cannot revoke your own token; another admin can.</p>
  </section>`;
}
