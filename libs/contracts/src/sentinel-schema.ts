import { z } from 'zod';
import { AgentNameSchema, ShortTextSchema } from './common';

/** How a run ends inside a workflow (seed: `dispatch.status`). */
export const DispatchStatus = { advance: 'advance', hold: 'hold', loop: 'loop', terminate: 'terminate' } as const;
export type DispatchStatus = (typeof DispatchStatus)[keyof typeof DispatchStatus];
export const DispatchStatusSchema = z.enum(['advance', 'hold', 'loop', 'terminate']);

/**
 * The provenance a dispatch may carry (seed 000 §5: an agent-emitted decision defaults to
 * `agent`; the engine's synthesised fallback is `engine_fallback`). Accepted so payloads written
 * for the seed stay valid, but it is a claim, never trusted: the router records an agent-emitted
 * decision as `agent` whatever it says, and only Baton itself writes `engine_fallback`.
 */
export const DispatchClaimedOriginSchema = z.enum(['agent', 'engine_fallback']);
export type DispatchClaimedOrigin = z.infer<typeof DispatchClaimedOriginSchema>;

export const DispatchSchema = z.strictObject({
  status: DispatchStatusSchema,
  reason: ShortTextSchema.optional(),
  task_hint: AgentNameSchema.optional(),
  workflow: AgentNameSchema.optional(),
  step: AgentNameSchema.optional(),
  origin: DispatchClaimedOriginSchema.optional(),
});
export type Dispatch = z.infer<typeof DispatchSchema>;

export const FunctionCallSchema = z.strictObject({
  function: z.literal('call_agent'),
  agent_name: AgentNameSchema,
  callback: AgentNameSchema.optional(),
});
export type FunctionCall = z.infer<typeof FunctionCallSchema>;

/**
 * The AGENT_RUN_CONFIG payload. Invariants: at least one of task / dispatch / function_call, and
 * task and function_call never together (two ways to name a target are ambiguous).
 */
export const AgentRunConfigSchema = z
  .strictObject({
    task: AgentNameSchema.optional(),
    dispatch: DispatchSchema.optional(),
    function_call: FunctionCallSchema.optional(),
  })
  .superRefine((config, ctx) => {
    if (config.task === undefined && config.dispatch === undefined && config.function_call === undefined) {
      ctx.addIssue({ code: 'custom', message: 'at least one action is required: task, dispatch or function_call' });
    }
    if (config.task !== undefined && config.function_call !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'task and function_call are mutually exclusive' });
    }
  })
  // The same invariants for validators in other languages (docs/schemas/agent-run-config.json).
  .meta({
    anyOf: [{ required: ['task'] }, { required: ['dispatch'] }, { required: ['function_call'] }],
    not: { required: ['task', 'function_call'] },
  });
export type AgentRunConfig = z.infer<typeof AgentRunConfigSchema>;
