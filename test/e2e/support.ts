import type { NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import type { RedisHandle } from '@baton/projections';
import { cleanupDeployment } from '@baton/testing';

/*
 * What the in-process end-to-end tests share: a two-step project definition, the teardown of the
 * services they run in this process, and a sleep (they poll with `waitFor` from @baton/wait, which
 * takes a throwing probe as "not yet").
 */

/** Stop the in-process services (last started first), delete the prefix's streams and Redis keys, close the clients. */
export async function stopInProcess(services: RunningService[], nats: NatsHandle, redis: RedisHandle, prefix: string): Promise<void> {
  for (const service of [...services].reverse()) await service.stop().catch(() => undefined);
  await cleanupDeployment(nats, redis.client, prefix);
  await redis.close();
  await nats.drain();
}

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
