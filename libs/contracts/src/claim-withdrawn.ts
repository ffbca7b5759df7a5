import { z } from 'zod';
import { AgentNameSchema, IdSchema, ProjectIdSchema } from './common';
import type { HandoffEventType } from './handoff';
import { inboxPrefixOf, projectAgentsInboxPrefix } from './principal';
import { RESULT_REFUSED_TOKEN } from './result-refused';
import { isUnder } from './subject-tokens';

/*
 * A claim taken away from its agent — its handoff abandoned, failed or archived by someone else,
 * requeued when the lease lapsed, failed at its deadline — is said to that agent's processes at
 * once, on a core NATS subject under the agent's own inbox prefix, which only the agent may read
 * and only Baton's services (and the admin) may write. It is a hint, not the record: at most once,
 * lost when no process of the agent is connected. Whoever gets it asks the ledger (a heartbeat of
 * the claim): the refusal is what stops the work. The stream's events stay the truth; the
 * heartbeat every third of the lease stays the guarantee.
 */

/** The handoff event types that can take a claim away from its agent (each one checked against the event types by `satisfies`). */
export const ClaimWithdrawingEventTypes = [
  'handoff.abandoned',
  'handoff.failed',
  'handoff.lease_expired',
  'handoff.deadline_expired',
  'handoff.archived',
] as const satisfies readonly HandoffEventType[];

/** What the ledger says to a claimer's processes when its claim is taken away (`claim-withdrawn.json`). */
export const ClaimWithdrawnSchema = z.object({
  project: ProjectIdSchema,
  handoff_id: IdSchema,
  /** The claim that was taken away: a process working under another claim of the handoff ignores it. */
  claim_id: IdSchema,
  /** The agent that held the claim (the subject's). */
  agent: AgentNameSchema,
  /** The event that took it away. */
  event_type: z.enum(ClaimWithdrawingEventTypes),
  /** Its stream sequence. */
  seq: z.number().int().positive(),
  /** When it was stored (ISO 8601). */
  at: z.string().min(1),
});
export type ClaimWithdrawn = z.infer<typeof ClaimWithdrawnSchema>;

/** The token under an agent's inbox prefix where it hears of claims taken away. */
const WITHDRAWN_TOKEN = 'withdrawn';

/** `<agent's inbox prefix>.withdrawn`: where the processes of `agent` of `project` hear of claims taken away. */
export function claimWithdrawnSubject(prefix: string, project: string, agent: string): string {
  return `${inboxPrefixOf(prefix, { kind: 'agent', project, agent })}.${WITHDRAWN_TOKEN}`;
}

/** The tokens under an agent's inbox prefix where only Baton's services write to it: its claims withdrawn, its results refused (result-refused.ts). */
const NOTICE_TOKENS = [WITHDRAWN_TOKEN, RESULT_REFUSED_TOKEN] as const;

/**
 * Is `subject` where an agent of `project` listens for what only Baton's services write — its
 * claim-withdrawn notices (`<agent's inbox prefix>.withdrawn`) or its refused-result notices
 * (`….refused`), or under one? Such a subject is never a reply subject: an answer aimed there would
 * be read as a notice.
 */
export function isAgentNoticeSubject(prefix: string, project: string, subject: string): boolean {
  const agents = `${projectAgentsInboxPrefix(prefix, project)}.`;
  if (!subject.startsWith(agents)) return false;
  // The agent's token, then one of its notice subjects: the subject itself or under it.
  const end = subject.indexOf('.', agents.length);
  if (end < 0) return false;
  const inbox = subject.slice(0, end);
  return NOTICE_TOKENS.some((token) => {
    const notices = `${inbox}.${token}`;
    return subject === notices || isUnder(subject, notices);
  });
}
