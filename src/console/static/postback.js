import { html } from 'htm/preact';
import { useRef, useState } from 'preact/hooks';
import { copyText } from './ui.js';

/**
 * What the buyer pastes into the affiliate network: this node's `/postback` (docs/clicks.md) for a
 * flow, with the network's own macros left as named placeholders, since every network names them
 * differently. `config` is `/acp/system/config` (its secrets redacted: a postback key shows as
 * set, never as its value); `streams` the flow's streams when the whole list is known, else null.
 */
export function PostbackPanel({ flow, config, streams }) {
  const [copied, setCopied] = useState(null);
  const url = useRef(null);
  // A key is required unless postback.require_key is false and none is configured (a configured
  // one shows as set, redacted). An older node without require_key required one only when set.
  const configured = Boolean(config?.postback?.key_sha256);
  const keyed = configured || (config?.postback?.require_key ?? false);
  const template = `${location.origin}/postback?click_id={network's click id macro}&status=sale&payout={network's payout macro}&currency=${flow.currency ?? 'USD'}&txid={network's transaction id macro}${keyed ? '&key=YOUR_KEY' : ''}`;
  // Active streams only: a paused one passing {click_id} sends no visitor to its offer.
  const active = streams?.filter((s) => s.status === 'active');
  const closed = active?.some((s) => s.target_url.includes('{click_id}'));
  return html`<section class="panel" aria-label="Postback URL">
    <h3>Postback URL</h3>
    <code class="token" data-testid="postback-url" ref=${url}>${template}</code>
    <div class="actions">
      <button type="button" onClick=${async () => setCopied(await copyText(url.current))}>Copy postback URL</button>
      <span class="muted" role="status" data-testid="postback-copied">${copied ?? ''}</span>
    </div>
    <p class="hint">Paste it into the affiliate network, replacing each <code>{network's … macro}</code> with the macro that network uses for it (its documentation names them, e.g. <code>{clickid}</code>); the <code>status</code> is <code>lead</code>, <code>sale</code> or <code>rejected</code>. The address is this console's: use the one the network reaches if it differs.</p>
    ${
      !config
        ? ''
        : configured
          ? html`<p class="hint" data-testid="postback-key">This node requires a postback key: the URL ends with <code>&key=YOUR_KEY</code>: put your key there (the node keeps only its SHA-256, in <code>postback.key_sha256</code>).</p>`
          : keyed
            ? html`<p class="hint" data-testid="postback-key">This node requires a postback key: the URL ends with <code>&key=YOUR_KEY</code>: put your key there. It is the key the first node printed when it started (on standard error; the nodes keep only its hash). Lost it, or leaked? An admin makes a new one with <code>POST /acp/postback/rotate-key</code>; the old one keeps working for <code>postback.key_grace_hours</code> (${config.postback.key_grace_hours ?? 24} h) while the network's URL is changed.</p>`
            : html`<p class="notice warn" data-testid="postback-key">This node takes postbacks without a key (<code>postback.require_key: false</code>): anyone who knows a click id can post conversions to it. Remove that setting (the next start makes a key and prints it once), then add <code>&key=YOUR_KEY</code> to the URL.</p>`
    }
    ${
      active && active.length > 0 && !closed
        ? html`<p class="notice warn" data-testid="postback-click-id">No stream of this flow passes <code>{click_id}</code> to its offer: the network never learns the click id, so no postback can name the click and the loop cannot close. Put <code>{click_id}</code> in the offer's target URL (e.g. <code>?aff_sub={click_id}</code>).</p>`
        : html`<p class="hint" data-testid="postback-click-id">The offer's target URL must carry <code>{click_id}</code> (e.g. <code>?aff_sub={click_id}</code>): it is the click id the network sends back.</p>`
    }
  </section>`;
}
