import { batonStreamNames, consumerInfos, deploymentStreamNames, type NatsHandle } from '@baton/eventstore';
// The stream cleanup lives with the integration specs' helpers (the SDK's specs use it too, and may not depend on @baton/testing).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { deleteStreams, removeDeploymentStreams, STREAM_DELETE_ATTEMPTS } from '../../eventstore/src/int/cleanup';

export { deleteStreams, removeDeploymentStreams, STREAM_DELETE_ATTEMPTS };

/**
 * A deployment's streams and keys as a test, the bench or the demo sees them from outside: wait until
 * its consumers are idle, and remove what a throwaway prefix leaves behind. The specs of the apps,
 * which may not depend on @baton/testing, import this file by its path for their cleanup (it needs
 * nothing but @baton/eventstore), as they do libs/eventstore/src/int/servers.ts.
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

/**
 * Delete a deployment's streams — every one a deployment of `prefix` may hold
 * (`deploymentStreamNames`: events, inbox, dead letters, the watchdog's snapshots, the token
 * revocation log) — and its Redis keys (`<prefix>:*`). A stream that could not be deleted is an
 * error naming it, thrown once the keys are gone too ({@link deleteStreams}): a failure swallowed
 * here is a stream that outlives the run on the shared server.
 */
export async function cleanupDeployment(nats: Pick<NatsHandle, 'jsm'>, redis: KeyRemover, prefix: string): Promise<void> {
  const left = await deleteStreams(nats, deploymentStreamNames(prefix));
  await removeDeploymentKeys(redis, prefix);
  if (left.length > 0) throw new Error(`cleanup left ${left.length} stream(s) of ${prefix} on NATS: ${left.join('; ')}`);
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
