import { parseProjectRef } from '@baton/projections';
import { UsageError } from './errors';

/**
 * An inbox item id as `baton inbox` prints it (`InboxItemId`, libs/projections): the kind, the
 * project, and the id of what it is about — the stop packet, the held run, the handoff.
 */
export interface InboxItemRef {
  kind: 'stop' | 'hold' | 'handback' | 'escalation';
  project: string;
  /** The packet id (stop), the workflow_run_id (hold) or the handoff id (handback, escalation). */
  id: string;
}

/**
 * The inbox item `value` names — `stop:<project>:<packet_id>`, `hold:<seq>:<project>:<workflow_run_id>`,
 * `handback:<project>:<handoff_id>`, `escalation:<project>:<handoff_id>` — or null when it is not
 * in that form (a plain id).
 */
export function parseInboxItemId(value: string): InboxItemRef | null {
  const at = value.indexOf(':');
  if (at <= 0) return null;
  const kind = value.slice(0, at);
  let rest = value.slice(at + 1);
  if (kind === 'hold') {
    const seq = /^[0-9]+:/.exec(rest);
    if (seq === null) return null;
    rest = rest.slice(seq[0].length);
  } else if (kind !== 'stop' && kind !== 'handback' && kind !== 'escalation') return null;
  const ref = parseProjectRef(rest);
  return ref === null ? null : { kind, project: ref.project, id: ref.id };
}

/** What answers each kind of inbox item, as a command line (`<id>`: the id it takes). */
const ANSWERED_BY: Record<InboxItemRef['kind'], string> = {
  stop: 'baton answer <packet_id> --project <project> --action …',
  hold: 'baton answer-hold <workflow_run_id> --project <project> --action …',
  handback: 'baton decide <handoff_id> accept|rework --project <project>',
  escalation: 'nothing in the inbox answers an escalation (it is read only: baton handoff <handoff_id> --project <project> shows it)',
};

/**
 * The id a command takes, from its argument: an inbox item id of a kind the command answers gives
 * its id and sets `--project` (a `--project` naming another project is a usage error); an inbox
 * item id of another kind is a usage error (exit 2) saying which command and id answer it, never
 * sent on to be answered `not_found`; anything else is taken as the plain id.
 */
export function idFromArgument(
  value: string,
  takes: InboxItemRef['kind'],
  what: string,
  project: string | undefined,
): { id: string; project: string | undefined } {
  const item = parseInboxItemId(value);
  if (item === null) return { id: value, project };
  if (item.kind !== takes) {
    const command = ANSWERED_BY[item.kind].replace(/<project>/g, item.project).replace(/<[a-z_]+_id>/, item.id);
    throw new UsageError(`${value} is the inbox item of a${item.kind === 'escalation' ? 'n' : ''} ${item.kind}, not ${what}: ${command}`);
  }
  if (project !== undefined && project !== item.project) throw new UsageError(`${value} is an inbox item of project ${item.project}, not ${project}`);
  return { id: item.id, project: item.project };
}
