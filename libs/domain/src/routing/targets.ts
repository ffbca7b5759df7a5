import type { AgentDefinition, RouteTarget, WorkflowDefinition, WorkflowStep } from '@baton/contracts';

/** The step with this id, if the workflow has it. */
export function stepById(workflow: WorkflowDefinition, id: string): WorkflowStep | undefined {
  return workflow.steps.find((step) => step.id === id);
}

/** Where a workflow starts: its entry step and that step's agent. */
export function entryTarget(workflow: WorkflowDefinition): RouteTarget {
  const entry = stepById(workflow, workflow.entry);
  if (entry === undefined) throw new Error(`workflow '${workflow.name}' has no entry step '${workflow.entry}' (the schema forbids this)`);
  return { agent: entry.agent, step: entry.id };
}

/** The forward edge of a step (seed 000 §3 rule 4), when it has one. */
export function forwardEdge(workflow: WorkflowDefinition, stepId: string): RouteTarget | null {
  const step = stepById(workflow, stepId);
  if (step?.next === undefined) return null;
  const next = stepById(workflow, step.next);
  return next === undefined ? null : { agent: next.agent, step: next.id };
}

/** The first step run by `agent` found by walking forward edges from (not including) `from`. */
function nextStepOf(workflow: WorkflowDefinition, from: string, agent: string): WorkflowStep | undefined {
  let step = stepById(workflow, from);
  for (let hops = 0; step?.next !== undefined && hops < workflow.steps.length; hops++) {
    step = stepById(workflow, step.next);
    if (step?.agent === agent) return step;
  }
  return undefined;
}

export type Resolved = { ok: true; target: RouteTarget } | { ok: false; problem: string };

/**
 * Resolve a workflow-relative name (a `task`, a `dispatch.task_hint`, a human-typed intent) to a
 * target. In order: a step id of the workflow; an agent that runs a step (the first of its steps
 * reached by walking forward edges from the current step, else its first step in declaration
 * order); an agent whose `role` equals the name (case-insensitive), at that agent's
 * first step when it has one; any other project agent, as a sub-call under the current step.
 */
export function resolveNamedTarget(name: string, workflow: WorkflowDefinition, agents: readonly AgentDefinition[], currentStep: string): Resolved {
  const asStep = stepById(workflow, name);
  if (asStep !== undefined) return { ok: true, target: { agent: asStep.agent, step: asStep.id } };
  const lower = name.toLowerCase();
  const agent = agents.find((a) => a.name === name) ?? agents.find((a) => a.role !== undefined && a.role.trim().toLowerCase() === lower);
  if (agent === undefined) {
    return { ok: false, problem: `'${name}' names no step, agent or role of workflow '${workflow.name}'` };
  }
  const ownStep = nextStepOf(workflow, currentStep, agent.name) ?? workflow.steps.find((step) => step.agent === agent.name);
  return { ok: true, target: { agent: agent.name, step: ownStep?.id ?? currentStep } };
}

/** Resolve an agent named by a function_call (or a callback): it must be an agent of the project. */
export function resolveAgent(name: string, agents: readonly AgentDefinition[], currentStep: string): Resolved {
  return agents.some((a) => a.name === name)
    ? { ok: true, target: { agent: name, step: currentStep } }
    : { ok: false, problem: `'${name}' is not an agent of this project` };
}
