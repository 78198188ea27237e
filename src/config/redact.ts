import type { TSchema } from '@sinclair/typebox';
import { type Config, ConfigSchema } from './schema.ts';

export const REDACTED = '[redacted]';

/** A copy of the configuration with every value under a `secret: true` schema node replaced. */
export function redactConfig(config: Config): Config {
  return redact(ConfigSchema, config) as Config;
}

function redact(schema: TSchema | undefined, value: unknown): unknown {
  if (value === undefined || value === null) return value;
  if (schema?.secret === true) {
    if (typeof value === 'object' && !Array.isArray(value)) {
      return Object.fromEntries(Object.keys(value).map((k) => [k, REDACTED]));
    }
    return REDACTED;
  }
  if (Array.isArray(value)) return value.map((v) => redact(schema?.items, v));
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const child =
        schema?.properties?.[k] ??
        (schema?.patternProperties ? Object.values(schema.patternProperties)[0] : undefined);
      out[k] = redact(child as TSchema | undefined, v);
    }
    return out;
  }
  return value;
}
