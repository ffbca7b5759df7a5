import { batonStreamNames, consumerInfos, deploymentStreamNames, type NatsHandle } from '@baton/eventstore';

/**
 * A deployment's streams and keys as a test, the bench or the demo sees them from outside: wait until
 * its consumers are idle, and remove what a throwaway prefix leaves behind.
 */

export interface WaitQuietOptions {
  /** Only these durable consumers (default every durable consumer). */
  durables?: readonly string[];
  /** Consecutive idle polls, 100 ms apart, that count as quiet (default 2). */
  rounds?: number;
}

/**
 * Wait until every durable consumer on the deployment's events and inbox streams has delivered
 * and had acknowledged everything (num_pending and num_ack_pending both 0). Returns false on timeout.
 */
export async function waitQuiet(nats: NatsHandle, prefix: string, timeoutMs: number, options: WaitQuietOptions = {}): Promise<boolean> {
  const names = batonStreamNames(prefix);
  const rounds = options.rounds ?? 2;
  const deadline = Date.now() + timeoutMs;
  let quietRounds = 0;
  while (Date.now() < deadline) {
    let busy = false;
    for (const stream of [names.events, names.inbox]) {
      for await (const info of consumerInfos(nats.jsm, stream)) {
        if (!info.config.durable_name) continue;
        if (options.durables && !options.durables.includes(info.config.durable_name)) continue;
        if (info.num_pending > 0 || info.num_ack_pending > 0) busy = true;
      }
    }
    quietRounds = busy ? 0 : quietRounds + 1;
    if (quietRounds >= rounds) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

/** The part of a Redis client {@link cleanupDeployment} uses (an ioredis client has it). */
export interface KeyRemover {
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[cursor: string, keys: string[]]>;
  unlink(...keys: string[]): Promise<number>;
}

/** Delete a deployment's streams (events, inbox, dead letters) and Redis keys (`<prefix>:*`). */
export async function cleanupDeployment(nats: NatsHandle, redis: KeyRemover, prefix: string): Promise<void> {
  for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
  await removeDeploymentKeys(redis, prefix);
}

/**
 * Delete a deployment's Redis keys (`<prefix>:*`), scanning a few thousand at a time: a single
 * `KEYS` over the half a million keys a bench leaves (100 000 open handoffs) outlasted the
 * client's command timeout, and the keys stayed behind on the shared Redis.
 */
export async function removeDeploymentKeys(redis: KeyRemover, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}
