import { z } from 'zod';
import { AgentNameSchema, Limits, ProjectIdSchema, ShortTextSchema } from './common';

/**
 * Minimal project definitions: the agents of a project and its workflows (a linear or looping
 * chain of steps joined by `next` edges). A later issue adds YAML loading, handoff routes and
 * meshes; new fields are added as optional keys so existing definitions keep parsing.
 *
 * Vocabulary: a *step* is a position in a workflow, run by exactly one agent. The same agent may
 * run several steps (seed 000 §6: `architect` runs both `analyze` and `plan`).
 */

/** A step id: the same alphabet as agent names (letters, digits, `_ - .`). */
export const StepIdSchema = AgentNameSchema;
export type StepId = z.infer<typeof StepIdSchema>;

/** An agent of the project. `role` is the free-text role shown to teammates (seed 000 §7). */
export const AgentDefinitionSchema = z.strictObject({
  name: AgentNameSchema,
  role: ShortTextSchema.optional(),
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
    name: AgentNameSchema,
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
export const WorkflowRefSchema = z.strictObject({ name: AgentNameSchema, version: z.number().int().min(1) });
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
    agents: z.array(AgentDefinitionSchema).min(1).max(Limits.maxListItems),
    workflows: z.array(WorkflowDefinitionSchema).max(Limits.maxListItems).default([]),
  })
  .superRefine((project, ctx) => {
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
  });
export type ProjectDefinition = z.infer<typeof ProjectDefinitionSchema>;

/** Who leads a project: one of its agents, or a person. */
export type ProjectLead = { kind: 'agent'; name: string } | { kind: 'person'; handle: string };

/** Resolve `lead`: a listed agent name is the agent; any other value is a person's handle. */
export function resolveLead(project: ProjectDefinition): ProjectLead | null {
  if (project.lead === undefined) return null;
  return project.agents.some((agent) => agent.name === project.lead)
    ? { kind: 'agent', name: project.lead }
    : { kind: 'person', handle: project.lead };
}

/** Find one version of a workflow (the highest version when `version` is omitted). */
export function findWorkflow(project: ProjectDefinition, name: string, version?: number): WorkflowDefinition | undefined {
  const candidates = project.workflows.filter((w) => w.name === name && (version === undefined || w.version === version));
  return candidates.reduce<WorkflowDefinition | undefined>((best, w) => (best === undefined || w.version > best.version ? w : best), undefined);
}
