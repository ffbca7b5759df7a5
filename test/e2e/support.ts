/*
 * What the in-process end-to-end tests share: a two-step project definition and a sleep (they
 * poll with `waitFor` from @baton/wait, which takes a throwing probe as "not yet").
 */

/** A project with a lead and a two-step workflow `feature`: triage (issue) → analyze (architect, terminal). */
export function twoStepDefinition(project: string) {
  return {
    project,
    lead: 'lena',
    agents: [
      { name: 'issue', role: 'Triage' },
      { name: 'architect', role: 'Architect' },
    ],
    workflows: [
      {
        name: 'feature',
        version: 1,
        entry: 'triage',
        steps: [
          { id: 'triage', agent: 'issue', next: 'analyze' },
          { id: 'analyze', agent: 'architect', terminal: true },
        ],
      },
    ],
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
