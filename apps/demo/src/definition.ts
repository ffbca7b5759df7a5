import type { ProjectDefinition } from '@baton/contracts';
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
  } as ProjectDefinition;
  return definition;
}
