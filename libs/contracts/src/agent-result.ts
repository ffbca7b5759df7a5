import { z } from 'zod';
import { AgentNameSchema, IdSchema, IsoTimeSchema, Limits, ProjectIdSchema, ShortTextSchema, namedRecord, RecordKeySchema } from './common';
import { AgentRunConfigSchema } from './sentinel-schema';

/** What the agent can show for its work. Empty or placeholder entries are not evidence. */
export const EvidenceSchema = z.strictObject({
  tests_run: z.array(z.unknown()).max(Limits.maxListItems).optional(),
  artifacts: z.array(z.unknown()).max(Limits.maxListItems).optional(),
  work_product_id: z.string().max(Limits.maxIdLength).optional(),
});
export type Evidence = z.infer<typeof EvidenceSchema>;

/** A tool call the agent had not finished when it stopped; frozen into a stop packet. */
export const PendingToolCallSchema = z.strictObject({
  name: z.string().min(1).max(200),
  args: namedRecord(RecordKeySchema, z.unknown()),
  call_id: IdSchema.optional(),
});
export type PendingToolCall = z.infer<typeof PendingToolCallSchema>;

/** What the agent tried: tool or step names, and trace ids that point at the full trace. */
export const TriedSchema = z
  .array(
    z.strictObject({
      name: z.string().min(1).max(200),
      trace_id: z.string().max(200).optional(),
    }),
  )
  .max(Limits.maxListItems);
export type Tried = z.infer<typeof TriedSchema>;

export const BudgetUsedSchema = z.strictObject({
  tokens: z.number().int().nonnegative().optional(),
  cost_usd: z.number().nonnegative().optional(),
  steps: z.number().int().nonnegative().optional(),
  tool_calls: z.number().int().nonnegative().optional(),
});
export type BudgetUsed = z.infer<typeof BudgetUsedSchema>;

/** A `handoff_to_<target>` tool call made by an agent in a handoff mesh. */
export const HandoffToolCallSchema = z.strictObject({
  tool: z.string().min(1).max(200),
  call_id: IdSchema.optional(),
  arguments: namedRecord(RecordKeySchema, z.unknown()).optional(),
});
export type HandoffToolCall = z.infer<typeof HandoffToolCallSchema>;

/** The budget a `budget` stop hit, so the raise_cap form can show it and refuse a lower cap. */
export const StopCapSchema = z
  .strictObject({
    /** What is capped: `tool_calls`, `steps`, `tokens`, `cost_usd`... */
    name: z.string().min(1).max(80),
    limit: z.number().finite().nonnegative(),
    used: z.number().finite().nonnegative().optional(),
    /**
     * The cap counts whole things (tool calls, steps, tokens): the raise_cap form then takes whole
     * numbers only, and an answer with a fraction is refused. Absent: any number above the cap.
     */
    whole: z.boolean().optional(),
  })
  .superRefine((cap, ctx) => {
    if (cap.whole !== true) return;
    if (!Number.isInteger(cap.limit)) ctx.addIssue({ code: 'custom', path: ['limit'], message: `a whole cap's limit is a whole number, not ${cap.limit}` });
    if (cap.used !== undefined && !Number.isInteger(cap.used)) {
      ctx.addIssue({ code: 'custom', path: ['used'], message: `a whole cap's use is a whole number, not ${cap.used}` });
    }
  })
  .meta({
    anyOf: [
      { not: { properties: { whole: { const: true } }, required: ['whole'] } },
      { properties: { limit: { type: 'integer' }, used: { type: 'integer' } } },
    ],
  });
export type StopCap = z.infer<typeof StopCapSchema>;

/**
 * Why an agent run stopped for a person, when the agent itself reports a stop condition. A
 * `budget` stop may name the cap it hit (`cap`), so the operator's raise_cap form shows it and a
 * cap that does not exceed it is refused; `cap` belongs to budget stops only.
 */
export const AgentStopSignalSchema = z
  .strictObject({
    why: z.enum(['unknown_intent', 'policy', 'budget', 'parse_fail', 'thrash', 'circuit_open', 'banned_click', 'guard_failed']),
    detail: ShortTextSchema.optional(),
    cap: StopCapSchema.optional(),
  })
  .superRefine((stop, ctx) => {
    if (stop.cap !== undefined && stop.why !== 'budget') {
      ctx.addIssue({ code: 'custom', path: ['cap'], message: `only a budget stop names a cap, not a ${stop.why} stop` });
    }
  })
  .meta({ anyOf: [{ properties: { why: { const: 'budget' } } }, { not: { required: ['cap'] } }] });

/**
 * The result an agent microservice publishes when a run ends. The routing decision comes from
 * `decision` (typed) or, for legacy agents, from an AGENT_RUN_CONFIG sentinel inside `body`.
 * When both are present the typed decision wins and the body's sentinel is ignored.
 */
export const AgentResultSchema = z.strictObject({
  /** Unique per result; also the idempotency key of everything the result causes. */
  result_id: IdSchema,
  /** The agent run that produced this result: the agent's own id for its run of the step (the SDK uses the claim id); recorded, never routed on. */
  run_id: IdSchema.describe(
    "your agent's own id for the run that produced this result (the SDK sends the claim id); recorded on run.result_recorded, never routed on",
  ),
  project: ProjectIdSchema,
  /** The workflow run this result belongs to. */
  workflow_run_id: IdSchema,
  agent: AgentNameSchema,
  body: z.string().max(Limits.maxBodyChars).optional(),
  decision: AgentRunConfigSchema.optional(),
  deliverable: z.string().max(Limits.maxBodyChars).optional(),
  evidence: EvidenceSchema.optional(),
  tried: TriedSchema.optional(),
  pending_tool_call: PendingToolCallSchema.nullable().optional(),
  budget_used: BudgetUsedSchema.optional(),
  handoff_tool_calls: z.array(HandoffToolCallSchema).max(Limits.maxListItems).optional(),
  stop: AgentStopSignalSchema.optional(),
  /** Session variables the agent set (for returnable handoffs and WHEN conditions). */
  variables: namedRecord(RecordKeySchema, z.unknown()).optional(),
  /**
   * The built-in return action (seed 001): a reasoning child gives control back to its waiting
   * parent and forwards the customer's message. `confidence` / `ambiguous` are checked against
   * EXECUTION.pipeline.parentReturn.
   */
  return_to_parent: z
    .strictObject({
      message: z.string().max(Limits.maxShortText).optional(),
      confidence: z.number().min(0).max(1).optional(),
      ambiguous: z.boolean().optional(),
    })
    .optional(),
  /** The HANDOFF route the agent chose (an intent route, or a hand-back to its waiting parent). */
  handoff: z.strictObject({ to: AgentNameSchema, message: z.string().max(Limits.maxShortText).optional() }).optional(),
  /**
   * The handoff this run worked on, when it was started from one. A result for a run (or mesh)
   * that is on a handoff must name it, with the claim it holds (`claim_id`); see docs/runs.md.
   */
  handoff_id: IdSchema.optional(),
  /** The claim on `handoff_id` this agent holds (the ledger's reply to its claim). */
  claim_id: IdSchema.optional(),
  produced_at: IsoTimeSchema,
});
export type AgentResult = z.infer<typeof AgentResultSchema>;

/**
 * An agent result as the router's run inbox reads it: {@link AgentResultSchema} with `decision`
 * taken as it comes and checked afterwards by the sentinel's rules (`readTypedDecision` in
 * `@baton/domain`). A decision that breaks the contract — no action, `task` with `function_call`,
 * an unknown status — is not a refusal of the result: like a sentinel that does not parse, it is
 * the no-action default with its diagnostic (seed 000 §2, §5). Clients send {@link AgentResultSchema}.
 */
export const AgentResultWireSchema = AgentResultSchema.extend({ decision: z.unknown().optional() });
export type AgentResultWire = z.infer<typeof AgentResultWireSchema>;
