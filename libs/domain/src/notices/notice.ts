import {
  codePointLength,
  codePointPrefix,
  stripSentinels,
  type HumanActionNotice,
  type NoticeReason,
  type NoticeRecipient,
  type RunPeople,
} from '@baton/contracts';
import { neutralizeMentions } from './mentions';

/** The longest agent excerpt a notice carries; longer text is cut at a character boundary. */
export const NOTICE_EXCERPT_CHARS = 600;

/**
 * Who a HumanActionNotice mentions (seed 000 §5): the workflow starter, falling back to the issue
 * author and then the trigger author. Null only when the run knows none of the three (start_run
 * refuses such a run, so a started run always has a recipient).
 */
export function selectNoticeRecipient(people: RunPeople): NoticeRecipient | null {
  if (people.started_by !== null) return { handle: people.started_by, source: 'started_by' };
  if (people.issue_author !== null) return { handle: people.issue_author, source: 'issue_author' };
  if (people.trigger_author !== null) return { handle: people.trigger_author, source: 'trigger_author' };
  return null;
}

export interface NoticeInput {
  noticeId: string;
  project: string;
  workflowRunId: string;
  reason: NoticeReason;
  recipient: NoticeRecipient;
  /** Engine-authored one-liner (e.g. the Dispatch reason). It is neutralised too: it may quote an agent. */
  headline: string;
  /** Agent-authored text (a deliverable, a hold reason, a mesh turn). Sentinels removed and neutralised before it is stored. */
  agentText?: string | null;
  step: string | null;
  agent: string | null;
  stopId?: string;
  now: string;
}

/**
 * Build the one HumanActionNotice for a stop-for-a-human outcome. The agent's text loses every
 * AGENT_RUN_CONFIG sentinel (routing instructions, not words for a person; a run's or a mesh
 * turn's alike), and every piece of text that could hold agent words goes through
 * {@link neutralizeMentions}, so the only live mention the notifier renders is the recipient's.
 * Pure; the caller supplies the id and the time.
 */
export function buildHumanActionNotice(input: NoticeInput): HumanActionNotice {
  const text = input.agentText ? withoutControls(stripSentinels(input.agentText)).trim() : '';
  const excerpt = text !== '' ? neutralizeMentions(truncate(text, NOTICE_EXCERPT_CHARS)) : undefined;
  return {
    notice_id: input.noticeId,
    project: input.project,
    workflow_run_id: input.workflowRunId,
    reason: input.reason,
    recipient: input.recipient,
    headline: neutralizeMentions(truncate(oneLine(withoutControls(input.headline)), NOTICE_EXCERPT_CHARS)),
    ...(excerpt !== undefined ? { agent_excerpt: excerpt } : {}),
    step: input.step,
    agent: input.agent,
    ...(input.stopId !== undefined ? { stop_id: input.stopId } : {}),
    created_at: input.now,
  };
}

/**
 * Render a notice as the comment text the notifier posts: one engine-written mention of the
 * recipient, then the (already inert) headline and excerpt.
 */
export function renderNotice(notice: HumanActionNotice): string {
  const lines = [`@${notice.recipient.handle} — this run needs you (${notice.reason.replace('_', ' ')}): ${notice.headline}`];
  if (notice.agent_excerpt !== undefined) lines.push('', `> ${notice.agent_excerpt.split(LINE_BREAKS).join('\n> ')}`);
  return lines.join('\n');
}

/** Every way text breaks a line: CR LF, LF, CR, NEL, vertical tab, form feed, and the Unicode line and paragraph separators. */
const LINE_BREAKS = /\r\n|[\n\r\u0085\v\f\u2028\u2029]/;
const LINE_BREAK_RUNS = /(?:\r\n|[\n\r\u0085\v\f\u2028\u2029])+/g;

/**
 * Control characters that steer whatever displays the text, removed from a notice's headline and
 * excerpt: C0 and C1 controls but tab and the line breaks (NUL, bell, the ESC that starts a terminal
 * colour or cursor sequence — its printable rest stays, inert), and the bidirectional embeddings,
 * overrides and isolates that can show text in another order than it is stored.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is what this is for
const CONTROLS = /[\u0000-\u0008\u000e-\u001f\u007f-\u0084\u0086-\u009f\u202a-\u202e\u2066-\u2069]/g;

function withoutControls(text: string): string {
  return text.replace(CONTROLS, '');
}

/** The headline is one line: a reason or a stop's detail may quote text with line breaks, each run of which becomes one space. */
function oneLine(text: string): string {
  return text.replace(LINE_BREAK_RUNS, ' ');
}

/** `text` cut to `max` characters (code points, as the caps count them; never half of one), then `…`. */
function truncate(text: string, max: number): string {
  if (text.length <= max || codePointLength(text) <= max) return text;
  return `${codePointPrefix(text, max)}…`;
}
