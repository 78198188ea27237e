import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ExpositionWriter, negotiateFormat, OK, Recorder, Telemetry } from '../../src/telemetry/index.ts';
import { ManualClock } from '../../src/time/index.ts';

function sample(format: 'text' | 'openmetrics'): string {
  const w = new ExpositionWriter(format, 'svc_');
  w.counter('things', 'Things seen.', [
    ['kind="a"', 3],
    ['kind="b"', 0],
  ]);
  w.gauge('up', 'Is it up.', [['', 1]]);
  const r = new Recorder(Object.freeze([1, 5]));
  r.labels = 'route="/x"';
  for (const v of [0.5, 1, 3, 7]) r.record(v, OK);
  w.histogram('duration_milliseconds', 'Latency, ms.', [r]);
  return w.finish();
}

describe('exposition writer (snapshots written from the format specifications)', () => {
  test('text 0.0.4: HELP then TYPE, counters named with _total, cumulative buckets, no EOF', () => {
    assert.equal(
      sample('text'),
      [
        '# HELP svc_things_total Things seen.',
        '# TYPE svc_things_total counter',
        'svc_things_total{kind="a"} 3',
        'svc_things_total{kind="b"} 0',
        '# HELP svc_up Is it up.',
        '# TYPE svc_up gauge',
        'svc_up 1',
        '# HELP svc_duration_milliseconds Latency, ms.',
        '# TYPE svc_duration_milliseconds histogram',
        'svc_duration_milliseconds_bucket{route="/x",le="1"} 2',
        'svc_duration_milliseconds_bucket{route="/x",le="5"} 3',
        'svc_duration_milliseconds_bucket{route="/x",le="+Inf"} 4',
        'svc_duration_milliseconds_sum{route="/x"} 11.5',
        'svc_duration_milliseconds_count{route="/x"} 4',
        '',
      ].join('\n'),
    );
  });

  test('OpenMetrics 1.0: TYPE then HELP, counter family without _total, samples with it, # EOF last', () => {
    assert.equal(
      sample('openmetrics'),
      [
        '# TYPE svc_things counter',
        '# HELP svc_things Things seen.',
        'svc_things_total{kind="a"} 3',
        'svc_things_total{kind="b"} 0',
        '# TYPE svc_up gauge',
        '# HELP svc_up Is it up.',
        'svc_up 1',
        '# TYPE svc_duration_milliseconds histogram',
        '# HELP svc_duration_milliseconds Latency, ms.',
        'svc_duration_milliseconds_bucket{route="/x",le="1"} 2',
        'svc_duration_milliseconds_bucket{route="/x",le="5"} 3',
        'svc_duration_milliseconds_bucket{route="/x",le="+Inf"} 4',
        'svc_duration_milliseconds_sum{route="/x"} 11.5',
        'svc_duration_milliseconds_count{route="/x"} 4',
        '# EOF',
        '',
      ].join('\n'),
    );
  });

  test('format negotiation follows Accept', () => {
    const prometheus =
      'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
    assert.equal(negotiateFormat(prometheus), 'openmetrics');
    assert.equal(negotiateFormat('text/plain'), 'text');
    assert.equal(negotiateFormat(undefined), 'text');
  });
});

describe('telemetry hub', () => {
  const make = (version?: string) =>
    new Telemetry({
      clock: new ManualClock(),
      serverId: 'n1',
      version,
      commit: 'abc"def',
      prefix: 'svc',
      controllerBucketsMs: [1],
      httpBucketsMs: [10, 100],
      taskBucketsMs: [1],
      isLeader: () => false,
      processMetrics: false,
    });

  test('system metrics: every section, version only when set, uptime from the injected clock', () => {
    const clock = new ManualClock();
    const t = new Telemetry({
      clock,
      serverId: 'n1',
      version: '2.0.0',
      commit: 'c',
      prefix: 'svc',
      controllerBucketsMs: [1],
      httpBucketsMs: [10, 100],
      taskBucketsMs: [1],
      isLeader: () => true,
      processMetrics: false,
    });
    clock.advance(12_345);
    const m = t.systemMetrics();
    assert.deepEqual(Object.keys(m), [
      'host',
      'cache',
      'db',
      'http',
      'controllers',
      'tasks',
      'streams',
      'traffic_flows',
      'clicks',
      'postbacks',
      'version',
    ]);
    assert.equal(m.host.uptime_seconds, 12.345);
    assert.deepEqual(m.http.buckets, { '10': 0, '100': 0, '+Inf': 0 });
    assert.equal('version' in make().systemMetrics(), false);
  });

  test('build_info escapes its labels; is_leader follows the election', async () => {
    const { body } = await make().exposition('text');
    assert.ok(body.includes('svc_build_info{version="",commit="abc\\"def"} 1\n'));
    assert.ok(body.includes('svc_is_leader 0\n'));
  });
});
