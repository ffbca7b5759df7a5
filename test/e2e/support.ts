/*
 * What the in-process end-to-end tests share: a two-step project definition and a polling wait.
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

/** Poll `probe` every 100 ms until it gives a value (a probe that throws counts as not yet); reject after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
