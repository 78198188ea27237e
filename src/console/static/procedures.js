import { html } from 'htm/preact';
import { acp } from './api.js';
import { ErrorLine, Loading, POLL_MS, usePoll } from './ui.js';

const LEVEL_KEY = 'sluice.task_p95_ms';
/** The range the API accepts for `task_p95_ms`. */
const MAX_LEVEL = 86_400_000;
export const validLevel = (ms) => Number.isInteger(ms) && ms >= 1 && ms <= MAX_LEVEL;

/** The agreed task p95 level: the operator's own choice in this browser, else the node's `acp.task_p95_ms`. */
export function taskLevel(me) {
  const stored = Number(localStorage.getItem(LEVEL_KEY));
  return validLevel(stored) ? stored : me.task_p95_ms;
}
export function setTaskLevel(ms) {
  if (validLevel(ms)) localStorage.setItem(LEVEL_KEY, String(ms));
}

export const fetchProcedures = (level) => acp('/acp/system/procedures', { task_p95_ms: level });

/**
 * The seven operator procedures (docs/console.md#the-procedures-and-their-rules) with this node's
 * verdicts, as `sluice doctor` judges them.
 */
export function ProceduresPage({ me }) {
  const [report, error] = usePoll(() => fetchProcedures(taskLevel(me)), POLL_MS);
  if (!report) return html`<${ErrorLine} error=${error} /><${Loading} error=${error} />`;
  return html`<section aria-label="Operator procedures">
    <h2>Operator procedures</h2>
    <p class="hint">
      Judged on this node every ${POLL_MS / 1000} s by the same rules as <code>sluice doctor</code>${' '}
      (task p95 level ${report.task_p95_ms} ms; change it on the Tasks page).${' '}
      Version audit across nodes: run <code>sluice doctor --urls …</code>.
    </p>
    <${ErrorLine} error=${error} />
    <ol class="checklist">
      ${report.procedures.map(
        (p) => html`<li key=${p.key} class=${p.status} data-procedure=${p.key}>
          <span class="verdict" aria-label=${p.status === 'ok' ? 'ok' : 'finding'}>${p.status === 'ok' ? '✓' : '✗'}</span>
          <div>
            <strong>${p.id}. ${p.title}</strong>
            <div class="summary">${p.status === 'ok' ? p.summary : `${p.items.filter((i) => i.finding).length} to look at`}</div>
            ${
              p.items.length > 0
                ? html`<ul>
                    ${p.items.map(
                      (i) =>
                        html`<li class=${i.finding ? 'finding' : 'info'}><code>${i.subject}</code> ${i.message}</li>`,
                    )}
                  </ul>`
                : ''
            }
          </div>
        </li>`,
      )}
    </ol>
  </section>`;
}
