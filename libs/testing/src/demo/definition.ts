import type { MeshDefinition, ProjectDefinition } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';

/**
 * Seed 001's loan example, compiled from Baton's YAML (libs/definitions/src/examples.ts): the
 * supervisor, the income child and the offer agent, and the `loan_session` workflow. Throws when
 * the example does not compile (a bug, not an input error).
 */
export function loanExample(): Pick<ProjectDefinition, 'agents' | 'workflows'> {
  const compiled = compileProject([{ path: 'loans.yaml', text: LOAN_EXAMPLE_YAML }]);
  if (compiled.project === null) throw new Error(`the loan example does not compile: ${JSON.stringify(compiled.diagnostics)}`);
  return { agents: compiled.project.agents, workflows: compiled.project.workflows };
}

/**
 * Seed 004's handoff mesh of the demo: triage (the front desk, entry and output agent) and
 * billing hand a customer's conversation back and forth; the cap is low (4) so the demo's
 * ping-pong reaches it quickly.
 */
export const DEMO_MESH: { name: string; agents: readonly string[]; definition: MeshDefinition } = {
  name: 'helpdesk',
  agents: ['triage', 'billing'],
  definition: { name: 'helpdesk', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, outputs: ['triage'], max_iterations: 4 },
};

/** The demo project: seed 000's team (architect, context, issue), a support agent that can stop for a person, and two workers for the ledger cycle. */
export function demoDefinition(project: string): ProjectDefinition {
  const loans = loanExample();
  const definition = {
    project,
    lead: 'lead-agent',
    agents: [
      { name: 'architect', role: 'architect' },
      { name: 'context', role: 'context gatherer' },
      { name: 'issue', role: 'issue triage' },
      { name: 'support', role: 'customer support' },
      { name: 'builder', role: 'builder' },
      { name: 'lead-agent', role: 'lead' },
      ...loans.agents,
      { name: 'triage', role: 'Front desk (handoff mesh)' },
      { name: 'billing', role: 'Billing specialist (handoff mesh)' },
    ],
    workflows: [
      {
        name: 'feature',
        version: 1,
        entry: 'analyze',
        steps: [
          { id: 'analyze', agent: 'architect', next: 'context' },
          { id: 'context', agent: 'context', next: 'plan' },
          { id: 'plan', agent: 'architect', terminal: true },
        ],
      },
      {
        name: 'triage',
        version: 1,
        entry: 'triage',
        steps: [
          { id: 'triage', agent: 'issue', next: 'wrap' },
          { id: 'wrap', agent: 'architect', terminal: true },
        ],
      },
      {
        name: 'support',
        version: 1,
        entry: 'answer',
        steps: [{ id: 'answer', agent: 'support', terminal: true }],
      },
      ...loans.workflows,
    ],
    meshes: [DEMO_MESH.definition],
  } as ProjectDefinition;
  return definition;
}
