import { html } from 'htm/preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { AsOf, Card, fmt, Loading, POLL_MS, Row, SortTable } from './ui.js';

const COLOURS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2'];

/**
 * Time ticks in the console's one format (en-GB), not uPlot's own US one: times of day for a span
 * under a day (with seconds under ten minutes), day and month beyond.
 */
function timeTicks(_u, splits) {
  const span = splits.length > 1 ? splits[splits.length - 1] - splits[0] : 0;
  const opts =
    span >= 86400 * 2
      ? { day: '2-digit', month: '2-digit' }
      : span >= 86400
        ? { day: '2-digit', month: '2-digit', hour: '2-digit', minute: '2-digit' }
        : span < 600
          ? { hour: '2-digit', minute: '2-digit', second: '2-digit' }
          : { hour: '2-digit', minute: '2-digit' };
  return splits.map((s) => new Date(s * 1000).toLocaleString('en-GB', opts));
}

/** Value ticks as precise as their step (0.25 stays 0.25; two ticks never read the same). */
const valueTick = (v) => v.toLocaleString('en-GB', { maximumFractionDigits: 6 });

/**
 * Ticks for points a day or an hour apart (a report): on the points themselves, at most about ten,
 * each labelled once (a day by its date, an hour by its time, with the date when the range spans
 * days). uPlot's own splits fell between the points: one day read as ten dates around it, a week
 * as each date four times.
 */
function stepAxis(step) {
  return {
    splits: (u) => {
      const xs = u.data[0];
      const every = Math.max(1, Math.ceil(xs.length / 10));
      return xs.filter((_, i) => i % every === 0);
    },
    values: (u, splits) => {
      const xs = u.data[0];
      const days = xs.length > 0 && xs[xs.length - 1] - xs[0] >= 86400;
      const opts =
        step >= 86400
          ? { day: '2-digit', month: '2-digit' }
          : days
            ? { day: '2-digit', month: '2-digit', hour: '2-digit', minute: '2-digit' }
            : { hour: '2-digit', minute: '2-digit' };
      return splits.map((s) => new Date(s * 1000).toLocaleString('en-GB', opts));
    },
  };
}

/**
 * A uPlot chart that follows its container's width (1280 px desktop or a phone). `step` (seconds):
 * the points are that far apart (a report by day or hour), ticked on the points, and a lone point
 * sits in the middle of its own step.
 */
export function Chart({ title, series, data, unit, step }) {
  const box = useRef(null);
  const plot = useRef(null);
  const key = series.join('|');
  // Rebuilt only when the series change; new points go through setData below.
  useEffect(() => {
    const el = box.current;
    const opts = {
      width: Math.max(240, el.clientWidth),
      height: 180,
      legend: { show: true, live: false },
      // Rates and latencies start at zero, so a flat line reads as flat, not as noise.
      scales: {
        x: step ? { time: true, range: (_u, min, max) => [min - step / 2, max + step / 2] } : { time: true },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        step ? stepAxis(step) : { values: timeTicks },
        { size: 64, values: (_u, vals) => vals.map((v) => `${valueTick(v)}${unit}`) },
      ],
      series: [{}, ...series.map((label, i) => ({ label, stroke: COLOURS[i % COLOURS.length], width: 1.5 }))],
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(240, el.clientWidth), height: 180 }),
    );
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [key, step]);
  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);
  return html`<figure class="chart"><figcaption>${title}</figcaption><div ref=${box}></div></figure>`;
}

const sum = (controllers, field) => Object.values(controllers ?? {}).reduce((n, e) => n + (e[field] ?? 0), 0);

/** The console's own page and asset routes: its polling would otherwise top "busiest routes". */
const CONSOLE_ROUTES = new Set(['/acp', '/acp/', '/acp/assets/:file']);

/** Rates between consecutive samples, and the p95 of the busiest routes, as uPlot columns. */
function series(history) {
  const xs = [];
  const rate = [];
  const clientErrors = [];
  const serverErrors = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1];
    const b = history[i];
    const dt = (b.t - a.t) / 1000;
    const perSecond = (field) =>
      Math.max(0, (sum(b.metrics.controllers, field) - sum(a.metrics.controllers, field)) / dt);
    xs.push(b.t / 1000);
    rate.push(perSecond('count'));
    clientErrors.push(perSecond('client_errors'));
    serverErrors.push(perSecond('server_errors'));
  }
  const last = history.at(-1)?.metrics.controllers ?? {};
  const routes = Object.entries(last)
    .filter(([r]) => !CONSOLE_ROUTES.has(r))
    .sort((x, y) => y[1].count - x[1].count)
    .slice(0, 5)
    .map(([r]) => r);
  // The recent window's p95 (the last five minutes) moves with the traffic; the since-start one barely does.
  const p95 = routes.map((r) =>
    history.slice(1).map((s) => {
      const e = s.metrics.controllers?.[r];
      return e ? (e.recent?.p95_ms ?? e.p95_ms) : null;
    }),
  );
  return { xs, rate, clientErrors, serverErrors, routes, p95 };
}

/**
 * The node registry (`/acp/cluster/nodes`): who leads (from the lease), who is alive, which build —
 * a node that stopped gracefully has left it, one that crashed shows as not alive.
 */
function Nodes({ cluster, at, current, serverId }) {
  if (!cluster?.items) return null;
  const columns = [
    {
      key: 'server_id',
      label: 'Node',
      sort: (n) => n.server_id,
      render: (n) => html`<code>${n.server_id}</code>${n.server_id === serverId ? ' (this node)' : ''}`,
    },
    {
      key: 'is_leader',
      label: 'Role',
      sort: (n) => !n.is_leader,
      render: (n) => (n.is_leader ? 'leader' : 'follower'),
    },
    {
      key: 'alive',
      label: 'Alive',
      sort: (n) => !n.alive,
      render: (n) => html`<span class=${n.alive ? 'ok-text' : 'bad-text'}>${n.alive ? 'yes' : 'no'}</span>`,
    },
    { key: 'last_seen', label: 'Last seen', sort: (n) => n.last_seen, render: (n) => fmt.since(n.last_seen) },
    {
      key: 'started_at',
      label: 'Started',
      sort: (n) => n.started_at,
      render: (n) => fmt.since(n.started_at),
    },
    { key: 'version', label: 'Version', render: (n) => n.version ?? 'not set' },
    { key: 'commit', label: 'Commit', render: (n) => html`<code>${n.commit}</code>` },
  ];
  return html`<section class="nodes" aria-label="Cluster nodes">
    <h3>Nodes (${cluster.leader_election} leader election)</h3>
    ${current ? '' : html`<${AsOf} at=${at} what="The node list (it comes from the database)" />`}
    <${SortTable}
      label="Cluster nodes"
      columns=${columns}
      rows=${cluster.items}
      rowKey=${(n) => n.server_id}
      rowClass=${(n) => (n.alive ? '' : 'bad')}
    />
  </section>`;
}

export function OverviewPage({ me, live }) {
  const m = live.metrics;
  if (!m) return html`<${Loading} error=${live.error ?? live.staleSince} />`;
  const { xs, rate, clientErrors, serverErrors, routes, p95 } = series(live.history);
  const leader = live.cluster?.leader_id;
  return html`<section aria-label="Overview">
    <div class="cards">
      <${Card} title="Node">
        <${Row} k="node id" v=${html`<code data-testid="overview-node-id">${m.host.server_id}</code>`} />
        <${Row} k="leader" v=${m.host.is_leader ? 'this node' : (leader ?? 'none')} />
        <${Row} k="uptime" v=${fmt.duration(m.host.uptime_seconds)} />
        <${Row} k="version" v=${m.version ?? 'not set'} />
        <${Row} k="commit" v=${html`<code>${me.commit}</code>`} />
      <//>
      <${Card} title="Cache">
        <${Row} k="entries" v=${`${fmt.n(m.cache.entries)} / ${fmt.n(m.cache.max_entries)}`} />
        <${Row} k="hit ratio" v=${fmt.pct(m.cache.hit_ratio)} />
        <${Row} k="evictions" v=${fmt.n(m.cache.evictions)} />
      <//>
      <${Card} title="Database">
        <${Row} k="driver" v=${m.db.driver} />
        <${Row} k="status" v=${html`<span class=${m.db.status === 'up' ? 'ok-text' : 'bad-text'}>${m.db.status}</span>`} />
        <${Row} k="queries / errors" v=${`${fmt.n(m.db.queries)} / ${fmt.n(m.db.errors)}`} />
        <${Row} k="p95" v=${fmt.ms(m.db.p95_ms)} />
        ${
          m.db.checkpoints &&
          html`<${Row}
            k="checkpoints / failed / backlog"
            v=${html`<span data-testid="overview-checkpoints" class=${m.db.checkpoints.failures > 0 ? 'bad-text' : ''}>${fmt.n(m.db.checkpoints.runs)} / ${fmt.n(m.db.checkpoints.failures)} / ${fmt.n(m.db.checkpoints.backlog_pages)} pages</span>`}
          />`
        }
      <//>
      <${Card} title="Outgoing HTTP">
        <${Row} k="requests" v=${fmt.n(m.http.total_requests)} />
        <${Row} k="errors" v=${html`<span class=${m.http.errors > 0 ? 'bad-text' : ''}>${fmt.n(m.http.errors)}</span>`} />
        <${Row} k="retries" v=${fmt.n(m.http.retries)} />
      <//>
      <${Card} title="Traffic">
        <${Row} k="flows (active)" v=${`${fmt.n(m.traffic_flows.total)} (${fmt.n(m.traffic_flows.active)})`} />
        <${Row} k="clicks / no match" v=${`${fmt.n(m.traffic_flows.clicks)} / ${fmt.n(m.traffic_flows.no_match)}`} />
        <${Row} k="streams (active)" v=${`${fmt.n(m.streams.total)} (${fmt.n(m.streams.active)})`} />
        ${
          m.traffic_flows.unknown_slugs?.recent?.length > 0 &&
          html`<${Row}
          k="slugs that route nowhere"
          v=${html`<span class="warn-text" data-testid="overview-unknown-slugs" title="Requests for a slug no flow has, or a paused flow's, since this node started: answered 404 or sent to the fallback URL, with no click counted">${m.traffic_flows.unknown_slugs.recent
            .slice(0, 3)
            .map((r) => `${r.slug} ×${fmt.n(r.count)}${r.flow === 'paused' ? ' (paused)' : ''}`)
            .join(', ')}</span>`}
        />`
        }
        ${
          m.clicks &&
          html`<${Row}
          k="click log: held / dropped"
          v=${html`<span data-testid="overview-click-log">${fmt.n(m.clicks.buffered + m.clicks.unacked)} / <span class=${m.clicks.dropped > 0 ? 'bad-text' : ''}>${fmt.n(m.clicks.dropped)}</span></span>`}
        />`
        }
        ${
          m.clicks?.failing_since &&
          html`<${Row}
          k="click log writes"
          v=${html`<span class="bad-text" data-testid="overview-click-log-failing" title=${m.clicks.last_error ?? ''}>failing since ${fmt.since(m.clicks.failing_since)}</span>`}
        />`
        }
      <//>
    </div>
    <${Nodes}
      cluster=${live.cluster}
      at=${live.clusterAt}
      current=${live.clusterAt === live.at}
      serverId=${live.metrics?.host?.server_id ?? me.server_id}
    />
    <div class="charts">
      <${Chart} title="Requests per second, all routes" series=${['req/s']} data=${[xs, rate]} unit="" />
      <${Chart}
        title="Errors per second: 5xx (this node failed) and 4xx (callers' mistakes)"
        series=${['5xx/s', '4xx/s']}
        data=${[xs, serverErrors, clientErrors]}
        unit=""
      />
      <${Chart} title="p95 by route, last five minutes (busiest five)" series=${routes} data=${[xs, ...p95]} unit=" ms" />
    </div>
    <p class="hint" data-testid="sampled">Sampled every ${POLL_MS / 1000} s while this tab is open; the last 15 minutes are kept in the page.</p>
  </section>`;
}
