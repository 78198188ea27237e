// The console's only way to the node: the same ACP endpoints scripts use, with the token kept in
// sessionStorage (gone when the tab closes, never in a URL).

import { ROLES } from './vocabulary.js';

const TOKEN_KEY = 'sluice.token';

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** An ACP error answer: the contract's code, message, request id and field details. */
export class AcpError extends Error {
  constructor(status, body) {
    const e = body?.error ?? {};
    super(e.message ?? `HTTP ${status}`);
    this.status = status;
    // Null when the answer carried no code (a proxy's error page): nothing is shown rather than a made-up one.
    this.code = e.code ?? null;
    this.requestId = e.request_id ?? null;
    this.details = Array.isArray(e.details) ? e.details : [];
  }
}

/** Fired when the node refuses the token: the app goes back to the login form. */
export const SIGNED_OUT = 'sluice:signed-out';

export async function acp(path, body = {}) {
  let res;
  try {
    res = await fetch(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${session.token ?? ''}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch {
    throw new AcpError(0, { error: { code: 'network', message: 'The node did not answer.' } });
  }
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    if (res.status === 401) window.dispatchEvent(new Event(SIGNED_OUT));
    throw new AcpError(res.status, json);
  }
  return json;
}

/** A POST whose answer is text (a report as CSV); errors as {@link acp}. */
export async function acpText(path, body = {}) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${session.token ?? ''}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new AcpError(res.status, await res.json().catch(() => ({})));
  return res.text();
}

const RANK = Object.fromEntries(ROLES.map((r, i) => [r, i]));
/** True when `role` is at least `required` — only to hide what the API would refuse anyway. */
export const can = (role, required) => (RANK[role] ?? -1) >= RANK[required];

/**
 * Field errors of a `validation.invalid_input` answer keyed by form field: `/slug` → `slug`,
 * `/filters/countries_include/0` → `countries_include`.
 */
export function fieldErrors(err) {
  const out = {};
  for (const d of err?.details ?? []) {
    const parts = String(d.path ?? '')
      .split('/')
      .filter(Boolean);
    const field = parts[0] === 'filters' && parts[1] ? parts[1] : (parts[0] ?? '_');
    // A rule's problem names the rule: "rule 2: "300.1.1.1/8" is not an IPv4 … address".
    const message =
      field === 'rules' && parts[2] !== undefined ? `rule ${Number(parts[2]) + 1}: ${d.message}` : d.message;
    out[field] ??= message;
  }
  return out;
}
