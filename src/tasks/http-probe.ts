import { type CronTaskConfig, PROBE_DEFAULTS } from '../config/index.ts';
import type { TaskContext } from '../cron/index.ts';
import type { HttpClient } from '../http-client/index.ts';

/**
 * `http.probe`: a synthetic check of an external dependency through the HTTP client
 * (docs/http-client.md); a run fails on an unexpected status, an error or a timeout. Header values
 * are secrets: the client is told so, and never logs or captures them.
 */
export function httpProbe(
  name: string,
  cfg: CronTaskConfig,
  httpClient: HttpClient,
): (ctx: TaskContext) => Promise<void> {
  // The loader fills these in; a configuration built another way (a test) may leave them out.
  const expected = cfg.expect_status ?? PROBE_DEFAULTS.expect_status;
  const headers = cfg.headers ?? PROBE_DEFAULTS.headers;
  return async ({ signal }) => {
    const res = await httpClient.request({
      url: cfg.url!,
      method: cfg.method ?? PROBE_DEFAULTS.method,
      headers,
      secretHeaders: Object.keys(headers),
      retries: cfg.retries ?? PROBE_DEFAULTS.retries,
      timeoutMs: cfg.timeout_ms,
      totalTimeoutMs: cfg.timeout_ms,
      client: `probe:${name}`,
      signal,
    });
    if (res.status !== expected) throw new Error(`expected HTTP ${expected}, got ${res.status}`);
  };
}
