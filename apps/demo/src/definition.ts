import type { ProjectDefinition } from '@baton/contracts';

/** The demo project: seed 000's team (architect, context, issue), a support agent that can stop for a person, and two workers for the ledger cycle. */
export function demoDefinition(project: string): ProjectDefinition {
  return {
    project,
    lead: 'lead-agent',
    agents: [
      { name: 'architect', role: 'architect' },
      { name: 'context', role: 'context gatherer' },
      { name: 'issue', role: 'issue triage' },
      { name: 'support', role: 'customer support' },
      { name: 'builder', role: 'builder' },
      { name: 'lead-agent', role: 'lead' },
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
    ],
  } as ProjectDefinition;
}
