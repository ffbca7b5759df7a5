// What every diagnosis tool of this folder does around its measurement: connect to the shared
// servers, start the four services from dist under a fresh prefix (no NATS auth, the bench's Node
// flags or BENCH_NODE_ARGS), publish the bench definition, run the tool, then stop the services,
// print what they logged at warn or error, and delete the prefix's streams and keys (KEEP=1 keeps
// them for a look afterwards).
import { connectNats, type NatsHandle } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, endedServices, publishCycleDefinition, type ServiceProcess, startPlatform, stopService } from '@baton/testing';
import { measureHops, type HopsOptions, type HopsResult } from '../hops';
import { accountedTargets, benchNodeArgs, brokerUrls, readCpu } from '../platform';

export interface DebugPlatform {
  nats: NatsHandle;
  redis: ReturnType<typeof createRedis>;
  prefix: string;
  services: ServiceProcess[];
}

export async function withDebugPlatform(run: (platform: DebugPlatform) => Promise<void>, env: Record<string, string> = {}): Promise<void> {
  // NATS_URL / REDIS_URL (inherited by the services too) point it at other servers, e.g. a
  // nats-server started with a monitoring port to count API requests and messages per hop.
  const urls = brokerUrls();
  const nats = await connectNats({ servers: urls.nats, reconnect: false });
  const redis = createRedis(urls.redis);
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform(
    { BATON_PREFIX: prefix, LOG_LEVEL: process.env['LL'] ?? 'warn', WATCHDOG_MAX_HOPS: '100000', BATON_NATS_AUTH: 'none', ...env },
    { nodeArgs: benchNodeArgs },
  );
  try {
    await publishCycleDefinition(nats, prefix, 'bench');
    await run({ nats, redis, prefix, services });
  } finally {
    // A service that died during the run (a tool may have caught the failure it caused): which, and how.
    for (const ended of endedServices(services)) console.log(ended);
    for (const s of services) await stopService(s);
    for (const s of services) {
      const lines = s.output
        .join('')
        .split('\n')
        .filter((l) => (l.includes('"level":"warn"') || l.includes('"level":"error"')) && !l.includes('NATS authentication is off'));
      console.log(`--- ${s.name}: ${lines.length} warn/error lines`);
      for (const l of lines.slice(0, 8)) console.log(l.slice(0, 600));
    }
    if (!process.env['KEEP']) await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}

/**
 * The bench's hop measurement on a debug platform: RUNS runs (default 64), a 2 s warm-up, the
 * services' CPU accounted, progress on the console; `overrides` set the phases' lengths and rate.
 */
export function measureDebugHops(platform: DebugPlatform, overrides: Partial<HopsOptions> = {}): Promise<HopsResult> {
  return measureHops({
    nats: platform.nats,
    redis: platform.redis.client,
    prefix: platform.prefix,
    project: 'bench',
    runs: Number(process.env['RUNS'] ?? 64),
    warmupSeconds: 2,
    throughputSeconds: 5,
    latencySeconds: 3,
    log: console.log,
    cpu: () => readCpu(accountedTargets(platform.services)),
    ...overrides,
  });
}
