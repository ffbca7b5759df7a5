/*
 * What the in-process end-to-end tests share: a two-step project definition and a polling wait.
 */
import { waitFor as waitForValue } from '@baton/testing';

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

/**
 * {@link waitForValue} for these tests: a probe that throws (a stream or consumer not there yet)
 * counts as "not yet".
 */
export function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  return waitForValue(() => probe().catch(() => undefined), what, timeoutMs);
}
