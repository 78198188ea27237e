import { readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { Value, type ValueError } from '@sinclair/typebox/value';
import { Cron } from 'croner';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { isSecretKey, Redactor } from './redact.ts';
import {
  type Config,
  ConfigSchema,
  CronTaskSchema,
  DEFAULT_TASKS,
  KIND_SCOPES,
  POSTBACK_PARAMS,
  POSTBACK_STATUSES,
  PROBE_DEFAULTS,
  TASK_NAME_PATTERN,
} from './schema.ts';

/** Exit code for a configuration error (EX_CONFIG from sysexits.h). */
export const EXIT_CONFIG = 78;

/** A configuration problem; its message names the key, where it came from and what was expected. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly exitCode = EXIT_CONFIG;
}

export interface LoadOptions {
  /** `--config-dir`; else `APP_CONFIG_DIR`; else `./config`. */
  configDir?: string | undefined;
  /** `--mode`; else `APP_MODE`; else `development`. */
  mode?: string | undefined;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export interface LoadedConfig {
  config: Config;
  mode: string;
  dir: string;
  /** Files actually read, in merge order. */
  files: string[];
}

type Plain = Record<string, unknown>;
const ENV_PREFIX = 'APP__';
const MODE_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const TASK_NAME = new RegExp(TASK_NAME_PATTERN);

const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads `DIR/config.yml` (optional) and `DIR/config.{mode}.yml` (required), deep-merges them, applies
 * `APP__A__B=value` environment overrides, fills defaults from the schema and validates the result.
 * Throws {@link ConfigError} on the first problem.
 */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const mode = opts.mode ?? env.APP_MODE ?? 'development';
  if (!MODE_PATTERN.test(mode)) {
    throw new ConfigError(`config: mode "${mode}" is invalid: expected letters, digits, "_" or "-"`);
  }
  const dir = resolve(cwd, opts.configDir ?? env.APP_CONFIG_DIR ?? './config');

  const origin = new Map<string, string>();
  const merged: Plain = {};
  mergeInto(merged, { cron: { tasks: structuredClone(DEFAULT_TASKS) } }, 'the built-in defaults', '', origin);
  const files: string[] = [];
  const basePath = join(dir, 'config.yml');
  const modePath = join(dir, `config.${mode}.yml`);
  const base = readYaml(basePath, false);
  if (base !== undefined) {
    files.push(basePath);
    mergeInto(merged, base, basePath, '', origin);
  }
  const modeDoc = readYaml(modePath, true);
  files.push(modePath);
  mergeInto(merged, modeDoc ?? {}, modePath, '', origin);
  applyEnv(merged, env, origin);

  const sourceOf = (path: string): string => {
    for (let p = path; p !== ''; p = p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : '') {
      const src = origin.get(p);
      if (src !== undefined) return src;
    }
    return modePath;
  };

  const config = Value.Default(ConfigSchema, structuredClone(merged)) as Config;
  // TypeBox does not descend into record values when filling defaults; tasks get theirs here, and
  // a probe the options its kind alone takes.
  const tasks = (config.cron as { tasks?: unknown } | undefined)?.tasks;
  if (isPlain(tasks))
    for (const [k, v] of Object.entries(tasks)) {
      // Checked before the schema: a name outside the record's key pattern escapes its validation.
      if (!TASK_NAME.test(k)) {
        throw new ConfigError(
          `config: cron.tasks.${shown(k)} in ${sourceOf(`cron.tasks.${k}`)}: invalid task name; expected 1 to 64 of A-Z a-z 0-9 . _ - (${TASK_NAME_PATTERN})`,
        );
      }
      const task = Value.Default(CronTaskSchema, v);
      tasks[k] =
        isPlain(task) && task.kind === 'http.probe' ? { ...structuredClone(PROBE_DEFAULTS), ...task } : task;
    }
  const first = Value.Errors(ConfigSchema, config).First();
  if (first !== undefined) {
    const key = pointerToKey(first.path);
    throw new ConfigError(`config: ${key || '(root)'} in ${sourceOf(key)}: ${explain(first)}`);
  }
  checkSemantics(config, sourceOf, (key) => origin.has(key));
  const checked = config as unknown as Config;
  for (const task of Object.values(checked.cron.tasks)) task.execution_scope ??= KIND_SCOPES[task.kind];
  return { config: checked, mode, dir, files };
}

function readYaml(path: string, required: boolean): Plain | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !required) return undefined;
    const why = code === 'ENOENT' ? 'the file does not exist' : `cannot be read (${code})`;
    throw new ConfigError(`config: ${path}: ${why}; expected a YAML mapping of configuration keys`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: false });
  } catch (err) {
    const detail = err instanceof YAMLParseError ? err.message.split('\n')[0] : String(err);
    throw new ConfigError(`config: ${path}: invalid YAML (${detail}); expected a YAML mapping`);
  }
  if (doc === null || doc === undefined) return {};
  if (!isPlain(doc)) throw new ConfigError(`config: ${path}: expected a YAML mapping at the top level`);
  return doc;
}

/** Deep merge where mappings merge key by key and everything else (lists included) replaces. */
function mergeInto(target: Plain, source: Plain, from: string, prefix: string, origin: Map<string, string>) {
  for (const [k, v] of Object.entries(source)) {
    if (k === '__proto__' || k === 'constructor' || k === 'prototype') {
      throw new ConfigError(`config: ${prefix}${k} in ${from}: reserved key name`);
    }
    const key = prefix + k;
    if (isPlain(v) && isPlain(target[k])) {
      mergeInto(target[k] as Plain, v, from, `${key}.`, origin);
    } else {
      target[k] = isPlain(v) ? mergeInto({}, v, from, `${key}.`, origin) : v;
    }
    origin.set(key, from);
  }
  return target;
}

function applyEnv(target: Plain, env: NodeJS.ProcessEnv, origin: Map<string, string>) {
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || raw === undefined) continue;
    const parts = name.slice(ENV_PREFIX.length).toLowerCase().split('__');
    const from = `environment variable ${name}`;
    if (parts.some((p) => p === ''))
      throw new ConfigError(`config: ${name}: expected APP__SECTION__KEY=value`);
    let value: unknown;
    try {
      value = raw === '' ? '' : parseYaml(raw);
    } catch {
      value = raw;
    }
    const leaf: Plain = {};
    let node = leaf;
    for (const p of parts.slice(0, -1)) node = node[p] = {} as Plain;
    node[parts.at(-1)!] = value;
    mergeInto(target, leaf, from, '', origin);
  }
  for (const [name, key] of [
    ['APP_VERSION', 'version'],
    ['APP_COMMIT', 'commit'],
  ] as const) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    if (!isPlain(target.app)) target.app = {};
    const app = target.app as Plain;
    if (app[key] === undefined) {
      app[key] = v;
      origin.set(`app.${key}`, `environment variable ${name}`);
    }
  }
}

function pointerToKey(path: string): string {
  return path.split('/').slice(1).join('.');
}

function describe(schema: TSchema): string {
  if (schema.anyOf) return `one of ${schema.anyOf.map((s: TSchema) => JSON.stringify(s.const)).join(', ')}`;
  const range =
    schema.minimum !== undefined && schema.maximum !== undefined
      ? ` from ${schema.minimum} to ${schema.maximum}`
      : schema.exclusiveMinimum !== undefined
        ? ` greater than ${schema.exclusiveMinimum}`
        : '';
  switch (schema.type) {
    case 'integer':
      return `an integer${range}`;
    case 'number':
      return `a number${range}`;
    case 'boolean':
      return 'true or false';
    case 'string': {
      // A length rule is said as it is: "non-empty" sent a too-short secret, and "matching" a
      // too-long URL that matched, looking elsewhere.
      const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
      const max = typeof schema.maxLength === 'number' ? schema.maxLength : undefined;
      const length =
        max !== undefined
          ? ` of ${Math.max(min, 1)} to ${max} characters`
          : min > 1
            ? ` of at least ${min} characters`
            : '';
      if (schema.pattern) return `a string${length} matching /${schema.pattern}/`;
      return length ? `a string${length}` : 'a non-empty string';
    }
    case 'array':
      return `a list${schema.description ? ` (${schema.description})` : ''}`;
    case 'object':
      return 'a mapping';
    default:
      return schema.description ?? 'a valid value';
  }
}

function explain(e: ValueError): string {
  if (e.message === 'Unexpected property')
    return 'unknown key; expected no such key (see docs/configuration.md)';
  // A secret is not quoted even when it is wrong: the message goes to the terminal and the logs.
  // Nor are a URL's credentials, wherever the URL stands (`cluster.advertise_url: ftp://u:pw@h`).
  const got =
    e.value === undefined
      ? 'nothing'
      : isSecretKey(e.path)
        ? 'a value not shown (secret)'
        : shown(typeof e.value === 'string' ? REFUSAL_REDACTOR.text(e.value) : e.value);
  if (e.value === undefined) return `required key is missing; expected ${describe(e.schema)}`;
  const infinite = typeof e.value === 'number' && !Number.isFinite(e.value);
  return `expected ${describe(e.schema)}, got ${got}${infinite ? ', not a finite number' : ''}`;
}

/** A value longer than this is shown cut, with its length: a 2,000-character URL fills no terminal. */
const SHOWN_MAX_CHARS = 120;

/**
 * A value as a message shows it: JSON, but YAML's spelling for what JSON has none of (`.inf` is a
 * valid YAML number; JSON would print it `null`).
 */
function shown(value: unknown): string {
  if (typeof value === 'string' && value.length > SHOWN_MAX_CHARS)
    return `${JSON.stringify(value.slice(0, SHOWN_MAX_CHARS))}… (${value.length} characters)`;
  if (typeof value === 'number' && !Number.isFinite(value))
    return Number.isNaN(value) ? '.nan' : value > 0 ? '.inf' : '-.inf';
  if (Array.isArray(value)) return `[${value.map(shown).join(',')}]`;
  if (isPlain(value))
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${shown(v)}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? String(value);
}

/** The default rule of what a URL may show: a refusal comes before the configuration's own rule. */
const REFUSAL_REDACTOR = new Redactor({
  secretQueryParams: ConfigSchema.properties.http_client.properties.secret_query_params.default,
});

function checkSemantics(c: Config, sourceOf: (key: string) => string, isSet: (key: string) => boolean) {
  const fail = (key: string, what: string): never => {
    throw new ConfigError(`config: ${key} in ${sourceOf(key)}: ${what}`);
  };
  /** The other key's value, and where it came from: the one that was wrong may be either. */
  const told = (key: string, value: number) =>
    isSet(key) ? `${value}, from ${sourceOf(key)}` : `${value}, the default`;
  for (const name of ['http_buckets_ms', 'controller_buckets_ms', 'task_buckets_ms'] as const) {
    const b = c.observability.metrics[name];
    for (let i = 1; i < b.length; i++) {
      if (b[i]! <= b[i - 1]!)
        fail(`observability.metrics.${name}`, `expected strictly increasing bounds, got ${shown(b)}`);
    }
  }
  // A network's words may add to the standard ones (docs/clicks.md#a-networks-own-words), never
  // change them: an alias named like a parameter, or a status value that is a standard one, would
  // quietly reread what every other network sends.
  for (const alias of Object.keys(c.postback.aliases)) {
    if ((POSTBACK_PARAMS as readonly string[]).includes(alias))
      fail(`postback.aliases.${alias}`, `${alias} is a postback parameter of its own; expected another name`);
  }
  const statusKeys = new Map<string, string>();
  for (const value of Object.keys(c.postback.statuses)) {
    const lower = value.toLowerCase();
    if ((POSTBACK_STATUSES as readonly string[]).includes(lower))
      fail(`postback.statuses.${value}`, `${lower} is a status of its own; expected another value`);
    const twin = statusKeys.get(lower);
    if (twin !== undefined)
      fail(`postback.statuses.${value}`, `the same value as ${twin} (values are read in any case)`);
    statusKeys.set(lower, value);
  }
  c.app.server.trusted_proxies.forEach((cidr, i) => {
    if (!parseCidr(cidr))
      fail(`app.server.trusted_proxies.${i}`, `expected an address or CIDR, got ${shown(cidr)}`);
  });
  // Two keys that must agree: the one that was set is named (a default cannot be where it went wrong).
  const { renew_interval_ms: renew, lease_ttl_ms: ttl, forget_after_ms: forget } = c.cluster;
  if (renew >= ttl) {
    if (isSet('cluster.renew_interval_ms'))
      fail(
        'cluster.renew_interval_ms',
        `expected less than cluster.lease_ttl_ms (${told('cluster.lease_ttl_ms', ttl)})`,
      );
    fail(
      'cluster.lease_ttl_ms',
      `expected more than cluster.renew_interval_ms (${told('cluster.renew_interval_ms', renew)})`,
    );
  }
  // A node counts as alive for three renewals; forgetting it sooner would drop live nodes.
  if (forget <= 3 * renew) {
    if (isSet('cluster.forget_after_ms') || !isSet('cluster.renew_interval_ms'))
      fail(
        'cluster.forget_after_ms',
        `expected more than three cluster.renew_interval_ms (3 × ${told('cluster.renew_interval_ms', renew)})`,
      );
    fail(
      'cluster.renew_interval_ms',
      `expected less than a third of cluster.forget_after_ms (${told('cluster.forget_after_ms', forget)})`,
    );
  }
  // Every ACP viewer sees the advertised address (the node list, cluster metrics, the configuration
  // view, `sluice doctor`), every visitor the fallback: neither is a place for a user or password.
  for (const [key, url, seen] of [
    ['cluster.advertise_url', c.cluster.advertise_url, 'every ACP viewer sees it'],
    ['routing.fallback_url', c.routing.fallback_url, 'every visitor sent there sees it'],
  ] as const) {
    if (url === undefined) continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      fail(key, 'expected an absolute http(s) URL');
    }
    if (parsed?.username || parsed?.password)
      fail(key, `must not carry credentials (${seen}); expected an http(s) URL without user:password@`);
  }
  if (c.storage.driver === 'postgres' && !c.storage.postgres.url) {
    fail(
      'storage.postgres.url',
      'required when storage.driver is postgres; expected postgres://user@host:port/db',
    );
  }
  if (c.cluster.leader_election === 'postgres' && c.storage.driver !== 'postgres') {
    fail(
      'cluster.leader_election',
      'postgres needs storage.driver postgres (the lease lives in the shared database)',
    );
  }
  const names = new Set<string>();
  c.acp.operators.forEach((op, i) => {
    if (names.has(op.name)) fail(`acp.operators.${i}.name`, `expected unique names, "${op.name}" repeats`);
    names.add(op.name);
  });
  for (const [name, task] of Object.entries(c.cron.tasks)) {
    const fields = task.schedule.trim().split(/\s+/).length;
    let problem = fields === 5 || fields === 6 ? undefined : `${fields} fields`;
    try {
      if (!problem) new Cron(task.schedule, { paused: true });
    } catch (err) {
      problem = (err as Error).message;
    }
    if (problem) {
      fail(
        `cron.tasks.${name}.schedule`,
        `expected a cron expression of 5 fields, or 6 with seconds first (${problem})`,
      );
    }
    if (task.kind !== 'http.probe') {
      // Options of another kind would be ignored without a word: as unknown keys, they stop the start.
      for (const key of PROBE_OPTIONS)
        if (task[key] !== undefined)
          fail(`cron.tasks.${name}.${key}`, `unknown key for kind ${task.kind}; only http.probe takes it`);
    }
    if (task.kind === 'clicks.flush' && task.execution_scope === 'leader')
      // Each node writes its own buffer: on the leader alone, the others would never write theirs.
      fail(`cron.tasks.${name}.execution_scope`, 'clicks.flush runs on every node; expected all (or none)');
    if (task.kind === 'http.probe') {
      if (task.url && !/^https?:\/\/[^/]/.test(task.url))
        fail(`cron.tasks.${name}.url`, 'expected an http(s) URL');
      if (!task.url) fail(`cron.tasks.${name}.url`, 'required for kind http.probe; expected an http(s) URL');
      if (!task.execution_scope)
        fail(`cron.tasks.${name}.execution_scope`, 'required for kind http.probe; expected leader or all');
    }
  }
}

/** The options only `http.probe` tasks take (docs/configuration.md#keys). */
const PROBE_OPTIONS = ['url', 'method', 'expect_status', 'retries', 'headers'] as const;

/** Parses `a.b.c.d/n`, `::1/128` or a bare address; returns null when it is not one. */
export function parseCidr(cidr: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', bits, extra] = cidr.split('/');
  const v = isIP(address);
  if (v === 0 || extra !== undefined) return null;
  const max = v === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : Number(bits);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (bits !== undefined && !/^\d+$/.test(bits)))
    return null;
  const family = v === 4 ? 'ipv4' : 'ipv6';
  try {
    new BlockList().addSubnet(address, prefix, family);
  } catch {
    return null;
  }
  return { address, prefix, family };
}
