import { z } from 'zod';
import { AgentNameSchema, IdSchema, IsoTimeSchema, Limits, ProjectIdSchema, ShortTextSchema } from './common';

/**
 * Engine-owned human notification (seed 000 §5, issue #795). On every stop-for-a-human outcome the
 * engine — never an agent — emits exactly one HumanActionNotice. It mentions one person: the
 * workflow starter, else the issue author, else the trigger author. Any agent-authored text a
 * notice carries has been made notification-inert first (`neutralizeMentions` in the domain).
 */

/** Which stop-for-a-human outcome the notice is about. */
export const NoticeReason = {
  /** A step marked `human_gate` finished; a person must approve before the workflow continues. */
  humanGate: 'human_gate',
  /** A plain hold: an agent's explicit `dispatch: hold`, or the no-action default hold. */
  hold: 'hold',
  /** The run reached a terminal step: the workflow completed and a person picks it up. */
  terminal: 'terminal',
  /** A stop with a stop packet (seed 003): unknown intent, policy, budget, thrash... */
  stop: 'stop',
} as const;
export type NoticeReason = (typeof NoticeReason)[keyof typeof NoticeReason];
export const NoticeReasonSchema = z.enum(['human_gate', 'hold', 'terminal', 'stop']);

/** Where the recipient came from, in fallback order (seed 000 §5). */
export const NoticeRecipientSource = {
  startedBy: 'started_by',
  issueAuthor: 'issue_author',
  triggerAuthor: 'trigger_author',
  /** A handoff mesh started without `started_by` notifies the project's lead (when a person). */
  projectLead: 'project_lead',
} as const;
export type NoticeRecipientSource = (typeof NoticeRecipientSource)[keyof typeof NoticeRecipientSource];
export const NoticeRecipientSourceSchema = z.enum(['started_by', 'issue_author', 'trigger_author', 'project_lead']);

/** A person's handle, without the leading `@` (e.g. `alice`, `dependabot[bot]`). */
export const PersonHandleSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.\-[\]/]*$/, 'a handle is letters, digits and _ . - [ ] / without a leading @');
export type PersonHandle = z.infer<typeof PersonHandleSchema>;

export const NoticeRecipientSchema = z.strictObject({
  handle: PersonHandleSchema,
  source: NoticeRecipientSourceSchema,
});
export type NoticeRecipient = z.infer<typeof NoticeRecipientSchema>;

/**
 * One notice to one person. `headline` is engine-authored; `agent_excerpt` is agent-authored text
 * that was passed through `neutralizeMentions`, so the only live mention is `recipient`.
 */
export const HumanActionNoticeSchema = z.strictObject({
  notice_id: IdSchema,
  project: ProjectIdSchema,
  workflow_run_id: IdSchema,
  reason: NoticeReasonSchema,
  recipient: NoticeRecipientSchema,
  headline: ShortTextSchema,
  agent_excerpt: ShortTextSchema.optional(),
  step: AgentNameSchema.nullable(),
  agent: AgentNameSchema.nullable(),
  /** The stop packet behind a `stop` notice. */
  stop_id: IdSchema.optional(),
  created_at: IsoTimeSchema,
});
export type HumanActionNotice = z.infer<typeof HumanActionNoticeSchema>;
