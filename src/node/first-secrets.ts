import { bootstrapAdmin } from '../auth/index.ts';
import type { PostbackKeys } from '../conversions/index.ts';
import type { Storage } from '../storage/index.ts';

/**
 * Shows the secrets a first start makes, once each: the bootstrap admin's token (development mode,
 * no operator configured or stored) and the postback key. Called after listening, so that a start
 * that fails (a busy port) does not spend the one showing. Printed on stderr by the CLI: stdout is
 * the JSON log stream, and a secret never goes into a log (docs/telemetry.md#logs).
 */
export async function showFirstSecrets(deps: {
  mode: string;
  operators: Storage['operators'];
  configuredOperators: number;
  postbackKeys: Pick<PostbackKeys, 'ensure'>;
  print: (line: string) => void;
}): Promise<void> {
  if (deps.mode === 'development') {
    const token = await bootstrapAdmin(deps.operators, deps.configuredOperators);
    if (token !== undefined)
      deps.print(
        `Created ACP operator "admin" (role admin). Its token, shown only this once:\n\n    ${token}\n`,
      );
  }
  const postbackKey = await deps.postbackKeys.ensure();
  if (postbackKey !== undefined) {
    deps.print(
      `Created the postback key. Networks send it as &key=... on /postback; shown only this once (POST /acp/postback/rotate-key makes another):\n\n    ${postbackKey}\n`,
    );
  }
}
