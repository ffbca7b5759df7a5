import { z } from 'zod';
import { AgentNameSchema, Limits, namedRecord, namePattern, ProjectIdSchema, RESERVED_NAME_MESSAGE, ShortTextSchema, tokenNameSchema } from './common';
import { MeshDefinitionSchema, validateMeshes } from './mesh';

/**
 * Minimal project definitions: the agents of a project and its workflows (a linear or looping
 * chain of steps joined by `next` edges). A later issue adds YAML loading, handoff routes and
 * meshes; new fields are added as optional keys so existing definitions keep parsing.
 *
 * Vocabulary: a *step* is a position in a workflow, run by exactly one agent. The same agent may
 * run several steps (seed 000 §6: `architect` runs both `analyze` and `plan`).
 */

/** A step id: the rules of an agent name (letters, digits, `_` and `-`). */
export const StepIdSchema = tokenNameSchema('step');

/** A workflow's name: the rules of an agent name. */
export const WorkflowNameSchema = tokenNameSchema('workflow');
export type StepId = z.infer<typeof StepIdSchema>;

// ---------------------------------------------------------------------------------------------
// Conversation definitions (seed 001): memory, gather, complete, handoff routes, return handlers.
// These are the *compiled* shapes (lowercase, normalized) that `libs/definitions` produces from
// Baton's YAML and the router routes over. Every key is optional so older definitions parse.

/** A session-variable name (memory variable, gather field, MAP/SET side). */
export const VariableNameSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(namePattern('[A-Za-z_][A-Za-z0-9_]*'), `variable names are letters, digits and _ (not starting with a digit); ${RESERVED_NAME_MESSAGE}`);

export const MemoryTypeSchema = z.enum(['string', 'number', 'boolean', 'object', 'list', 'any']);
export type MemoryType = z.infer<typeof MemoryTypeSchema>;

/** A variable an agent declares in its MEMORY; `readonly` variables are not writable by returns. */
export const MemoryVariableSchema = z.strictObject({
  name: VariableNameSchema,
  type: MemoryTypeSchema.default('any'),
  scope: z.enum(['session']).default('session'),
  description: ShortTextSchema.optional(),
  readonly: z.boolean().optional(),
});
export type MemoryVariable = z.infer<typeof MemoryVariableSchema>;

/** A field the agent gathers from the customer (its value becomes a variable of the agent's scope). */
export const GatherFieldSchema = z.strictObject({
  name: VariableNameSchema,
  prompt: ShortTextSchema.optional(),
  type: MemoryTypeSchema.default('any'),
  required: z.boolean().default(false),
});
export type GatherField = z.infer<typeof GatherFieldSchema>;

/**
 * A condition as compiled: `expression` is a deterministic condition over session variables
 * (evaluated by the router before any model runs; see `parseCondition` in `@baton/domain`);
 * `intent` is natural language only a model can judge (the agent picks the route in its result).
 */
export const CompiledConditionSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('expression'), source: ShortTextSchema }),
  z.strictObject({ kind: z.literal('intent'), text: ShortTextSchema }),
]);
export type CompiledCondition = z.infer<typeof CompiledConditionSchema>;

/** A COMPLETE condition of a child: when it is true after the child's result, the child returns. */
export const CompleteConditionSchema = z.strictObject({
  when: CompiledConditionSchema,
  respond: ShortTextSchema.optional(),
});
export type CompleteCondition = z.infer<typeof CompleteConditionSchema>;

export const ResumeWithSchema = z.enum([
  'original_handoff_utterance',
  'latest_child_user_utterance',
  'latest_session_user_utterance',
  'forwarded_return_message',
]);
export type ResumeWith = z.infer<typeof ResumeWithSchema>;

/** A value a SET assigns: any JSON value. */
export const SetValueSchema = z.union([z.string().max(Limits.maxShortText), z.number(), z.boolean(), z.null()]);

/**
 * What the parent does after its child returns (ON_RETURN, with a named RETURN_HANDLERS entry
 * already merged in by the compiler). `map` is child_field → parent_variable.
 */
export const OnReturnSchema = z.strictObject({
  action: z.enum(['continue', 'resume_intent']),
  resume_with: ResumeWithSchema.default('original_handoff_utterance'),
  map: namedRecord(VariableNameSchema, VariableNameSchema).default({}),
  set: namedRecord(VariableNameSchema, SetValueSchema).default({}),
  respond: ShortTextSchema.optional(),
  handler: z.string().min(1).max(200).optional(),
});
export type OnReturn = z.infer<typeof OnReturnSchema>;

/** HISTORY: how much conversation the child receives (`auto` is resolved at handoff time). */
export const HistoryPolicySchema = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('full') }),
  z.strictObject({ mode: z.literal('auto') }),
  z.strictObject({ mode: z.literal('none') }),
  z.strictObject({ mode: z.literal('summary_only') }),
  z.strictObject({ mode: z.literal('last_n'), count: z.number().int().min(1).max(Limits.maxListItems) }),
]);
export type HistoryPolicy = z.infer<typeof HistoryPolicySchema>;

/** ON_FAILURE: what runs when the handoff fails before the child accepts it. */
export const OnFailureSchema = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('continue') }),
  z.strictObject({ action: z.literal('escalate') }),
  z.strictObject({ action: z.literal('respond'), message: ShortTextSchema }),
]);
export type OnFailure = z.infer<typeof OnFailureSchema>;

/** The longest deadline a returnable handoff may have (30 days). */
export const MAX_RETURN_DEADLINE_MS = 30 * 24 * 60 * 60 * 1000;
/**
 * A returnable handoff's deadline when neither its route (`deadline_ms`) nor the project
 * (`execution.return_deadline_ms`) sets one: 24 hours. Delegation always comes back or escalates.
 */
export const DEFAULT_RETURN_DEADLINE_MS = 24 * 60 * 60 * 1000;

/**
 * The deadline (ms) of a returnable route: the route's own, else the project's
 * `execution.return_deadline_ms`, else {@link DEFAULT_RETURN_DEADLINE_MS}. Pure.
 */
export function returnDeadlineMs(route: Pick<HandoffRoute, 'deadline_ms'>, execution: ExecutionSettings | undefined): number {
  return route.deadline_ms ?? execution?.return_deadline_ms ?? DEFAULT_RETURN_DEADLINE_MS;
}

/** One HANDOFF route of an agent, compiled. */
export const HandoffRouteSchema = z.strictObject({
  to: AgentNameSchema,
  when: CompiledConditionSchema.optional(),
  summary: ShortTextSchema.optional(),
  history: HistoryPolicySchema.default({ mode: 'full' }),
  pass: z.array(VariableNameSchema).max(Limits.maxListItems).optional(),
  return: z.boolean().default(false),
  on_return: OnReturnSchema.optional(),
  on_failure: OnFailureSchema.default({ action: 'continue' }),
  /**
   * DEADLINE of a returnable route (ms): past it, a child that has not produced its first result
   * times out (`handoff_completed` outcome `timeout`) and ON_FAILURE runs. Overrides the project's
   * `execution.return_deadline_ms`; ignored on a permanent route.
   */
  deadline_ms: z.number().int().min(1).max(MAX_RETURN_DEADLINE_MS).optional(),
});
export type HandoffRoute = z.infer<typeof HandoffRouteSchema>;

/** EXECUTION.pipeline.parentReturn: when a reasoning child's built-in return action is honoured. */
export const ParentReturnSettingsSchema = z.strictObject({
  min_confidence: z.number().min(0).max(1).optional(),
  ignore_ambiguous: z.boolean().optional(),
});
export type ParentReturnSettings = z.infer<typeof ParentReturnSettingsSchema>;

export const ExecutionSettingsSchema = z.strictObject({
  pipeline: z.strictObject({ parent_return: ParentReturnSettingsSchema.optional() }).optional(),
  /**
   * Project-level deadline (ms) of every returnable HANDOFF route without its own DEADLINE;
   * {@link DEFAULT_RETURN_DEADLINE_MS} when absent. Read from the project's EXECUTION only.
   */
  return_deadline_ms: z.number().int().min(1).max(MAX_RETURN_DEADLINE_MS).optional(),
});
export type ExecutionSettings = z.infer<typeof ExecutionSettingsSchema>;

/** The session variable an AUTH profile reads when it names none. */
export const DEFAULT_AUTH_VARIABLE = 'authenticated';

/**
 * AUTH: the agent's authentication profile. When `required`, a HANDOFF route *to* this agent is
 * blocked (`handoff_completed` outcome `blocked`, cause `authentication_required`, code
 * `auth_profile`) unless the session variable `variable` is the boolean `true` — strictly: the
 * string "true", 1 or any other value is not authenticated. Read on the session variables, like
 * ENABLED_WHEN, and checked after it. `required` defaults to true (declaring a profile asks for
 * authentication; `false` switches it off); `variable` defaults to {@link DEFAULT_AUTH_VARIABLE}.
 */
export const AuthProfileSchema = z.strictObject({
  required: z.boolean().default(true),
  variable: VariableNameSchema.default(DEFAULT_AUTH_VARIABLE),
});
export type AuthProfile = z.infer<typeof AuthProfileSchema>;

/** An agent of the project. `role` is the free-text role shown to teammates (seed 000 §7). */
export const AgentDefinitionSchema = z.strictObject({
  name: AgentNameSchema,
  role: ShortTextSchema.optional(),
  /** GOAL: what the agent is for (shown to the agent). */
  goal: ShortTextSchema.optional(),
  /** Written as SUPERVISOR: its EXECUTION settings override the project's. */
  supervisor: z.boolean().optional(),
  memory: z.array(MemoryVariableSchema).max(Limits.maxListItems).optional(),
  gather: z.array(GatherFieldSchema).max(Limits.maxListItems).optional(),
  complete: z.array(CompleteConditionSchema).max(Limits.maxListItems).optional(),
  handoffs: z.array(HandoffRouteSchema).max(Limits.maxListItems).optional(),
  /** ENABLED_WHEN: a route to this agent is blocked while the condition is false. */
  enabled_when: CompiledConditionSchema.optional(),
  /** AUTH: a route to this agent is blocked while the customer is not authenticated (see {@link AuthProfileSchema}). */
  auth: AuthProfileSchema.optional(),
  execution: ExecutionSettingsSchema.optional(),
});
export type AgentDefinition = z.infer<typeof AgentDefinitionSchema>;

/**
 * One step of a workflow.
 * - `next`: the forward edge (seed 000 §3 rule 4), a step id of the same workflow.
 * - `human_gate`: after this step's agent advances, the engine holds for a person before it
 *   follows `next` (a stop-for-a-human outcome, seed 000 §5).
 * - `terminal`: the workflow completes when this step's agent advances (no `next` allowed).
 */
export const WorkflowStepSchema = z.strictObject({
  id: StepIdSchema,
  agent: AgentNameSchema,
  next: StepIdSchema.optional(),
  human_gate: z.boolean().optional(),
  terminal: z.boolean().optional(),
});
export type WorkflowStep = z.infer<typeof WorkflowStepSchema>;

/**
 * A versioned workflow. Refinements: step ids are unique, `entry` and every `next` name a step
 * of this workflow, and a terminal step has no `next`.
 */
export const WorkflowDefinitionSchema = z
  .strictObject({
    name: WorkflowNameSchema,
    version: z.number().int().min(1),
    entry: StepIdSchema,
    steps: z.array(WorkflowStepSchema).min(1).max(Limits.maxListItems),
  })
  .superRefine((workflow, ctx) => {
    const ids = new Set<string>();
    workflow.steps.forEach((step, index) => {
      if (ids.has(step.id)) {
        ctx.addIssue({ code: 'custom', path: ['steps', index, 'id'], message: `step id '${step.id}' is used twice` });
      }
      ids.add(step.id);
    });
    if (!ids.has(workflow.entry)) {
      ctx.addIssue({ code: 'custom', path: ['entry'], message: `entry '${workflow.entry}' is not a step of workflow '${workflow.name}'` });
    }
    workflow.steps.forEach((step, index) => {
      if (step.next !== undefined && !ids.has(step.next)) {
        ctx.addIssue({ code: 'custom', path: ['steps', index, 'next'], message: `next '${step.next}' of step '${step.id}' is not a step of this workflow` });
      }
      if (step.terminal === true && step.next !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['steps', index, 'next'], message: `terminal step '${step.id}' cannot have a next edge` });
      }
    });
  });
export type WorkflowDefinition = z.infer<typeof WorkflowDefinitionSchema>;

/** A reference to one version of a workflow, as a run records it. */
export const WorkflowRefSchema = z.strictObject({ name: WorkflowNameSchema, version: z.number().int().min(1) });
export type WorkflowRef = z.infer<typeof WorkflowRefSchema>;

/**
 * A project: its agents, its workflows and an optional lead. `lead` is an agent name when it names
 * a listed agent, otherwise a person's handle (see {@link resolveLead}). Refinements: agent names
 * are unique, (workflow name, version) pairs are unique, and every step's agent is listed.
 */
export const ProjectDefinitionSchema = z
  .strictObject({
    project: ProjectIdSchema,
    lead: z.string().min(1).max(Limits.maxIdLength).optional(),
    /**
     * The projects whose agents may hand work to this one (cross-project `create` with
     * `target_project` naming this project); `*` for any project. Absent or empty: none — a
     * project receives no other tenant's work unless its definition says so.
     */
    accepts_handoffs_from: z
      .array(z.union([ProjectIdSchema, z.literal('*')]))
      .max(Limits.maxListItems)
      .optional(),
    agents: z.array(AgentDefinitionSchema).min(1).max(Limits.maxListItems),
    workflows: z.array(WorkflowDefinitionSchema).max(Limits.maxListItems).default([]),
    /** Project-wide EXECUTION settings (a supervisor's own settings override them). */
    execution: ExecutionSettingsSchema.optional(),
    /**
     * Handoff meshes (seed 004); checked against the agents by `validateMeshes`. Absent means
     * none (optional rather than defaulted, so definitions typed before meshes still type-check).
     */
    meshes: z.array(MeshDefinitionSchema).max(Limits.maxListItems).optional(),
  })
  .superRefine((project, ctx) => {
    for (const issue of validateMeshes(
      project.meshes ?? [],
      project.agents.map((agent) => agent.name),
    )) {
      ctx.addIssue({ code: 'custom', path: ['meshes', ...issue.path], message: `${issue.code}: ${issue.message}`, params: { code: issue.code } });
    }
    const agents = new Set<string>();
    project.agents.forEach((agent, index) => {
      if (agents.has(agent.name)) {
        ctx.addIssue({ code: 'custom', path: ['agents', index, 'name'], message: `agent '${agent.name}' is listed twice` });
      }
      agents.add(agent.name);
    });
    const workflows = new Set<string>();
    project.workflows.forEach((workflow, wIndex) => {
      const key = `${workflow.name}@${workflow.version}`;
      if (workflows.has(key)) {
        ctx.addIssue({ code: 'custom', path: ['workflows', wIndex, 'name'], message: `workflow '${key}' is defined twice` });
      }
      workflows.add(key);
      workflow.steps.forEach((step, sIndex) => {
        if (!agents.has(step.agent)) {
          ctx.addIssue({
            code: 'custom',
            path: ['workflows', wIndex, 'steps', sIndex, 'agent'],
            message: `agent '${step.agent}' of step '${step.id}' is not listed in the project's agents`,
          });
        }
      });
    });
    project.agents.forEach((agent, aIndex) => {
      (agent.handoffs ?? []).forEach((route, rIndex) => {
        if (!agents.has(route.to)) {
          ctx.addIssue({
            code: 'custom',
            path: ['agents', aIndex, 'handoffs', rIndex, 'to'],
            message: `handoff target '${route.to}' of agent '${agent.name}' is not listed in the project's agents`,
          });
        }
      });
    });
  });
export type ProjectDefinition = z.infer<typeof ProjectDefinitionSchema>;

/** Who leads a project: one of its agents, or a person. */
export type ProjectLead = { kind: 'agent'; name: string } | { kind: 'person'; handle: string };

/** Resolve `lead`: a listed agent name is the agent; any other value is a person's handle. */
export function resolveLead(project: ProjectDefinition): ProjectLead | null {
  if (project.lead === undefined) return null;
  return project.agents.some((agent) => agent.name === project.lead) ? { kind: 'agent', name: project.lead } : { kind: 'person', handle: project.lead };
}

/** Find one version of a workflow (the highest version when `version` is omitted). */
export function findWorkflow(project: ProjectDefinition, name: string, version?: number): WorkflowDefinition | undefined {
  const candidates = project.workflows.filter((w) => w.name === name && (version === undefined || w.version === version));
  return candidates.reduce<WorkflowDefinition | undefined>((best, w) => (best === undefined || w.version > best.version ? w : best), undefined);
}
