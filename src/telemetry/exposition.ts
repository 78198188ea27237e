import type { Recorder } from './recorder.ts';

/**
 * A hand-written writer for the Prometheus text format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/) and OpenMetrics 1.0
 * (https://prometheus.io/docs/specs/om/open_metrics_spec/). It renders straight from the
 * recorders at scrape time, ~5x faster than building prom-client metric objects for the same
 * data (bench/telemetry/exposition.bench.ts), and nothing is copied between scrapes.
 */
export type ExpositionFormat = 'text' | 'openmetrics';

export const CONTENT_TYPES: Readonly<Record<ExpositionFormat, string>> = {
  text: 'text/plain; version=0.0.4; charset=utf-8',
  openmetrics: 'application/openmetrics-text; version=1.0.0; charset=utf-8',
};

/** OpenMetrics only when the client asks for it, as Prometheus does in its Accept header. */
export function negotiateFormat(accept: string | undefined): ExpositionFormat {
  return accept?.includes('application/openmetrics-text') ? 'openmetrics' : 'text';
}

/** A sample: pre-escaped labels (`a="x",b="y"`, or empty) and its value. */
export type Sample = readonly [labels: string, value: number];

const leCache = new WeakMap<readonly number[], string[]>();
function leLabels(bounds: readonly number[]): string[] {
  let les = leCache.get(bounds);
  if (les === undefined) {
    les = [...bounds.map((b) => `le="${formatNumber(b)}"`), 'le="+Inf"'];
    leCache.set(bounds, les);
  }
  return les;
}

export function formatNumber(v: number): string {
  if (Number.isFinite(v)) return String(v);
  return Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf';
}

const escapeHelp = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

export class ExpositionWriter {
  readonly format: ExpositionFormat;
  readonly prefix: string;
  #out = '';

  constructor(format: ExpositionFormat, prefix: string) {
    this.format = format;
    this.prefix = prefix;
  }

  #header(family: string, type: string, help: string): void {
    this.#out +=
      this.format === 'openmetrics'
        ? `# TYPE ${family} ${type}\n# HELP ${family} ${escapeHelp(help)}\n`
        : `# HELP ${family} ${escapeHelp(help)}\n# TYPE ${family} ${type}\n`;
  }

  #samples(name: string, samples: Iterable<Sample>): void {
    let out = '';
    for (const [labels, value] of samples) {
      out +=
        labels === '' ? `${name} ${formatNumber(value)}\n` : `${name}{${labels}} ${formatNumber(value)}\n`;
    }
    this.#out += out;
  }

  /** A counter; `name` is given without the `_total` suffix, which samples carry in both formats. */
  counter(name: string, help: string, samples: Iterable<Sample>): void {
    const full = this.prefix + name;
    this.#header(this.format === 'openmetrics' ? full : `${full}_total`, 'counter', help);
    this.#samples(`${full}_total`, samples);
  }

  gauge(name: string, help: string, samples: Iterable<Sample>): void {
    const full = this.prefix + name;
    this.#header(full, 'gauge', help);
    this.#samples(full, samples);
  }

  /** A histogram straight from recorders: cumulative buckets, `_sum` and `_count` per label set. */
  histogram(name: string, help: string, recorders: Iterable<Recorder>): void {
    const full = this.prefix + name;
    this.#header(full, 'histogram', help);
    let out = '';
    for (const r of recorders) {
      const les = leLabels(r.bounds);
      const sep = r.labels === '' ? '' : `${r.labels},`;
      const tail = r.labels === '' ? '' : `{${r.labels}}`;
      const buckets = r.buckets;
      let acc = 0;
      for (let i = 0; i < buckets.length; i++) {
        acc += buckets[i]!;
        out += `${full}_bucket{${sep}${les[i]}} ${acc}\n`;
      }
      out += `${full}_sum${tail} ${formatNumber(r.sum)}\n${full}_count${tail} ${r.count}\n`;
    }
    this.#out += out;
  }

  /** Appends already-rendered families (e.g. prom-client's process metrics) verbatim. */
  raw(text: string): void {
    this.#out += text.endsWith('\n') || text === '' ? text : `${text}\n`;
  }

  finish(): string {
    return this.format === 'openmetrics' ? `${this.#out}# EOF\n` : this.#out;
  }
}
