import { html, render } from 'htm/preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { AcpError, acp, can, SIGNED_OUT, session } from './api.js';
import { AuditPage } from './audit.js';
import { ClicksPage, ConversionsPage } from './clicks.js';
import { ClusterPage } from './cluster.js';
import { FlowsPage } from './flows.js';
import { OperatorsPage } from './operators.js';
import { OverviewPage } from './overview.js';
import { ProceduresPage } from './procedures.js';
import { ReportsPage } from './reports.js';
import { RoutesPage } from './routes.js';
import { TasksPage } from './tasks.js';
import { ErrorLine, fmt, POLL_MS } from './ui.js';

/** How much of the metrics history the charts keep. */
const HISTORY_MS = 15 * 60 * 1000;

const PAGES = [
  { hash: '#/overview', label: 'Overview', Page: OverviewPage },
  { hash: '#/routes', label: 'Routes', Page: RoutesPage },
  { hash: '#/tasks', label: 'Tasks', Page: TasksPage },
  { hash: '#/cluster', label: 'Cluster', Page: ClusterPage },
  { hash: '#/flows', label: 'Flows & streams', Page: FlowsPage },
  { hash: '#/clicks', label: 'Clicks', Page: ClicksPage },
  { hash: '#/conversions', label: 'Conversions', Page: ConversionsPage },
  { hash: '#/reports', label: 'Reports', Page: ReportsPage },
  { hash: '#/procedures', label: 'Procedures', Page: ProceduresPage },
  // Admin only: drawn in the navigation for admins alone (the API refuses the rest anyway).
  { hash: '#/operators', label: 'Operators', Page: OperatorsPage, role: 'admin' },
  { hash: '#/audit', label: 'Audit', Page: AuditPage, role: 'admin' },
];

function Login({ onLogin, notice }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    session.set(token.trim());
    try {
      onLogin(await acp('/acp/auth/whoami'));
    } catch (err) {
      session.clear();
      // The API's own code and request id stay, so the line reads e.g. "… (401 auth.unauthorized)".
      setError(
        err.status === 401
          ? new AcpError(401, {
              error: {
                code: err.code,
                message:
                  'The node refused this token: check that it was copied whole and has not been revoked',
                request_id: err.requestId,
              },
            })
          : err,
      );
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="login">
    <form onSubmit=${submit} aria-label="Sign in">
      <h1>Sluice ACP</h1>
      ${notice ? html`<p class="notice">${notice}</p>` : ''}
      <label for="token">Operator token</label>
      <input id="token" name="token" type="password" autocomplete="off" required value=${token}
        onInput=${(e) => setToken(e.currentTarget.value)} />
      <button type="submit" disabled=${busy}>Sign in</button>
      <${ErrorLine} error=${error} />
      <p class="hint">The token is kept in this tab only (sessionStorage) and sent as a bearer header.</p>
    </form>
  </main>`;
}

/** Polls system metrics (and who leads) for every page; keeps 15 minutes of samples for the charts. */
function useMetrics(active) {
  const [state, setState] = useState({
    metrics: null,
    cluster: null,
    error: null,
    at: null,
    staleSince: null,
  });
  const history = useRef([]);
  useEffect(() => {
    if (!active) {
      // Signed out: the next operator's charts start empty.
      history.current = [];
      return undefined;
    }
    let timer;
    let alive = true;
    const poll = async () => {
      try {
        // Who leads comes from the database; system metrics do not. While the database is down the
        // metrics keep coming (that is when they matter most) and the last known leader stays shown.
        const [metrics, cluster] = await Promise.all([
          acp('/acp/system/metrics'),
          acp('/acp/cluster/nodes').catch(() => undefined),
        ]);
        const now = Date.now();
        history.current = [...history.current.filter((s) => s.t > now - HISTORY_MS), { t: now, metrics }];
        if (alive)
          setState((s) => ({
            metrics,
            cluster: cluster ?? s.cluster,
            // When the node list was last read: behind `at` while the database is down.
            clusterAt: cluster ? now : s.clusterAt,
            error: null,
            at: now,
            staleSince: null,
          }));
      } catch (error) {
        // The node stopped answering: what is on screen is from the last answer, and says so.
        if (alive) setState((s) => ({ ...s, error, staleSince: s.staleSince ?? s.at ?? Date.now() }));
      }
      if (alive) timer = setTimeout(poll, POLL_MS);
    };
    poll();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [active]);
  return { ...state, history: history.current };
}

function App() {
  const [me, setMe] = useState(null);
  const [checking, setChecking] = useState(Boolean(session.token));
  const [notice, setNotice] = useState(null);
  const [hash, setHash] = useState(location.hash || '#/overview');
  const live = useMetrics(me !== null);

  useEffect(() => {
    const onHash = () => setHash(location.hash || '#/overview');
    const onSignedOut = () => {
      session.clear();
      // Only a signed-in tab is told it was signed out; a refused sign-in says so on its own.
      setMe((was) => {
        if (was) setNotice('Signed out: the node no longer accepts this token.');
        return null;
      });
    };
    window.addEventListener('hashchange', onHash);
    window.addEventListener(SIGNED_OUT, onSignedOut);
    // A reload keeps the session of this tab; only a refused token (401) ends it — a node that is
    // briefly unreachable or busy does not sign anyone out.
    if (session.token) {
      acp('/acp/auth/whoami')
        .then(setMe, (err) => {
          if (err.status === 401) session.clear();
          else setNotice(`The node did not answer (${err.message}); try again.`);
        })
        .finally(() => setChecking(false));
    }
    return () => {
      window.removeEventListener('hashchange', onHash);
      window.removeEventListener(SIGNED_OUT, onSignedOut);
    };
  }, []);

  if (checking) return html`<main class="login"><p>Connecting…</p></main>`;
  if (!me) return html`<${Login} onLogin=${setMe} notice=${notice} />`;
  const pages = PAGES.filter((p) => !p.role || can(me.role, p.role));
  const page = pages.find((p) => p.hash === hash.split('?')[0]) ?? pages[0];
  const isLeader = live.metrics?.host?.is_leader;
  const signOut = () => {
    session.clear();
    setNotice(null);
    setMe(null);
  };
  const stale = live.staleSince !== null && live.staleSince !== undefined;
  return html`<div class=${`shell ${stale ? 'stale' : ''}`}>
    <header>
      <strong class="brand">Sluice</strong>
      <span class="node" data-testid="node-id" title="X-Server-Id">${live.metrics?.host?.server_id ?? me.server_id}</span>
      ${isLeader === undefined ? '' : html`<span class=${`badge ${isLeader && !stale ? 'ok' : ''}`}>${isLeader ? 'leader' : 'follower'}</span>`}
      ${
        stale
          ? html`<span class="badge stale-badge" data-testid="stale" role="status">stale since ${fmt.time(new Date(live.staleSince).toISOString())}</span>`
          : live.at
            ? html`<small class="updated" data-testid="updated">updated ${fmt.time(new Date(live.at).toISOString())}</small>`
            : ''
      }
      <span class="spacer"></span>
      <span class="who">${me.name} <small>(${me.role})</small></span>
      <button type="button" class="link" onClick=${signOut}>Sign out</button>
    </header>
    <nav aria-label="Pages">
      ${pages.map((p) => html`<a href=${p.hash} aria-current=${p === page ? 'page' : undefined}>${p.label}</a>`)}
    </nav>
    ${
      stale
        ? html`<p class="error stale-banner" data-testid="stale-banner" role="alert">The node is not answering: everything below
            is as it was at ${fmt.time(new Date(live.staleSince).toISOString())} and is not live. Retrying every ${POLL_MS / 1000} s.</p>`
        : ''
    }
    <main>
      ${stale ? '' : html`<${ErrorLine} error=${live.error} />`}
      <${page.Page} me=${me} live=${live} />
    </main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('root'));
