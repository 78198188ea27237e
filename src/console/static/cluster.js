import { html } from 'htm/preact';
import { acp } from './api.js';
import { AsOf, ErrorLine, fmt, Loading, POLL_MS, SortTable, usePoll } from './ui.js';

const sum = (controllers, pick) => Object.values(controllers ?? {}).reduce((n, e) => n + (pick(e) ?? 0), 0);

/**
 * The cluster at a glance (#13): every node of the registry with its leader, liveness, last seen,
 * build, and the figures this node fetched from each peer (`/acp/cluster/metrics`); the version
 * audit (procedure 7) across them.
 */
export function ClusterPage() {
  const [nodes, nodesError, , nodesAt] = usePoll(() => acp('/acp/cluster/nodes'), POLL_MS);
  const [figures, figuresError] = usePoll(() => acp('/acp/cluster/metrics'), POLL_MS);
  if (!nodes) return html`<${ErrorLine} error=${nodesError} /><${Loading} error=${nodesError} />`;
  const byId = new Map((figures?.items ?? []).map((f) => [f.server_id, f]));
  // Procedure 7: the build most nodes run; every other one stands out.
  const builds = new Map();
  for (const n of nodes.items) {
    const b = `${n.commit} ${n.version ?? ''}`;
    builds.set(b, (builds.get(b) ?? 0) + 1);
  }
  const common = [...builds.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const odd = (n) => `${n.commit} ${n.version ?? ''}` !== common;
  const m = (n) => byId.get(n.server_id)?.metrics;
  const columns = [
    {
      key: 'server_id',
      label: 'Node',
      sort: (n) => n.server_id,
      render: (n) => html`<code>${n.server_id}</code>`,
    },
    {
      key: 'role',
      label: 'Role',
      render: (n) =>
        html`<span class=${`badge ${n.is_leader && n.alive ? 'ok' : ''}`}>${n.is_leader ? 'leader' : 'follower'}</span>`,
    },
    {
      key: 'alive',
      label: 'Alive',
      render: (n) =>
        html`<span class=${n.alive ? 'ok-text' : 'bad-text'}>${n.alive ? 'yes' : 'stale'}</span>`,
    },
    { key: 'last_seen', label: 'Last seen', render: (n) => fmt.since(n.last_seen) },
    { key: 'uptime', label: 'Uptime', render: (n) => fmt.duration(m(n)?.host?.uptime_seconds) },
    {
      key: 'requests',
      label: 'Requests',
      num: true,
      render: (n) => fmt.n(m(n) ? sum(m(n).controllers, (e) => e.count) : undefined),
    },
    {
      key: 'recent5xx',
      label: '5xx (5 min)',
      num: true,
      render: (n) => {
        const v = m(n) ? sum(m(n).controllers, (e) => e.recent?.server_errors) : undefined;
        return html`<span class=${v > 0 ? 'bad-text' : ''}>${fmt.n(v)}</span>`;
      },
    },
    { key: 'db', label: 'DB', render: (n) => m(n)?.db?.status ?? '–' },
    {
      key: 'clicks',
      label: 'Clicks held / dropped',
      render: (n) => {
        const c = m(n)?.clicks;
        if (!c) return '–';
        const bad = c.dropped > 0 || c.failing_since;
        return html`<span class=${bad ? 'bad-text' : ''}>${fmt.n(c.buffered + c.unacked)} / ${fmt.n(c.dropped)}${c.failing_since ? html`<br /><small>writes failing since ${fmt.time(c.failing_since)}</small>` : ''}</span>`;
      },
    },
    {
      key: 'build',
      label: 'Version · commit',
      render: (n) =>
        html`<span class=${odd(n) ? 'bad-text' : ''} data-testid=${`build-${n.server_id}`}>${n.version ?? 'not set'} · <code>${n.commit}</code>${odd(n) ? ' (differs)' : ''}</span>`,
    },
    {
      key: 'fetch',
      label: 'Figures',
      render: (n) => byId.get(n.server_id)?.error ?? (m(n) ? (figuresError ? 'not live' : 'live') : '–'),
    },
  ];
  const differing = nodes.items.filter(odd);
  return html`<section aria-label="Cluster">
    <header class="page-head"><h2>Cluster</h2></header>
    <p class="hint">${nodes.total} nodes · ${nodes.leader_election} leader election · leader ${nodes.leader_id ?? 'none'} ·
      this node <code>${nodes.this_node.server_id}</code>${nodesAt ? ` · updated ${fmt.time(new Date(nodesAt).toISOString())}` : ''}</p>
    <p class=${`notice ${differing.length ? 'warn' : ''}`} data-testid="version-audit">Version audit (procedure 7):${' '}
      ${differing.length === 0 ? `every node runs the same build (${common ?? '?'})` : `${differing.map((n) => n.server_id).join(', ')} run${differing.length === 1 ? 's' : ''} a different build from the rest`}</p>
    <${ErrorLine} error=${nodesError ?? figuresError} />
    ${nodesError || figuresError ? html`<${AsOf} at=${nodesAt} what="The cluster" />` : ''}
    <${SortTable} label="Cluster" columns=${columns} rows=${nodes.items} rowKey=${(n) => n.server_id} rowClass=${(n) => (n.alive ? '' : 'bad')} />
    ${nodes.items.length === 1 ? html`<p class="hint">One node. Nodes that share a PostgreSQL database appear here, each with its own figures.</p>` : ''}
  </section>`;
}
