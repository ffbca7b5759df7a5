import { AgentDefinition, ProjectDefinitionSchema, WorkflowDefinition } from '@baton/contracts';

/**
 * Test fixtures (not exported from the library): the seed 000 §6 team. `architect` runs both
 * `analyze` and `plan`; `issue` triages and may call `context` imperatively.
 *
 *   triage(issue) → analyze(architect) → context(context) → plan(architect)
 *     → review(reviewer, human_gate) → ship(shipper, terminal)
 *   draft(writer): no edge, not terminal (a dead end)
 */
export const project = ProjectDefinitionSchema.parse({
  project: 'demo',
  lead: 'alice',
  agents: [
    { name: 'issue', role: 'Triage' },
    { name: 'architect', role: 'Architect' },
    { name: 'context', role: 'Context gatherer' },
    { name: 'reviewer', role: 'Reviewer' },
    { name: 'shipper', role: 'Release' },
    { name: 'writer', role: 'Writer' },
    { name: 'security', role: 'Security reviewer' },
  ],
  workflows: [
    {
      name: 'feature',
      version: 1,
      entry: 'triage',
      steps: [
        { id: 'triage', agent: 'issue', next: 'analyze' },
        { id: 'analyze', agent: 'architect', next: 'context' },
        { id: 'context', agent: 'context', next: 'plan' },
        { id: 'plan', agent: 'architect', next: 'review' },
        { id: 'review', agent: 'reviewer', next: 'ship', human_gate: true },
        { id: 'ship', agent: 'shipper', terminal: true },
        { id: 'draft', agent: 'writer' },
      ],
    },
  ],
});

export const workflow: WorkflowDefinition = project.workflows[0]!;
export const agents: readonly AgentDefinition[] = project.agents;
