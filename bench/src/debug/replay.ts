// Diagnosis tool (not part of `npm run bench`): fill a deployment with SECONDS of closed-loop hops,
// stop the services, then rebuild every projection in this process (profile it with --cpu-prof).
//   SECONDS=20 node --cpu-prof --cpu-prof-dir=/tmp/prof dist/bench/src/debug/replay.js
// KEEP=<prefix> reuses a deployment a previous run left behind (PREFIX printed at the start).
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, publishCycleDefinition, startPlatform, stopService, waitQuiet } from '@baton/testing';
import { measureHops } from '../hops';
import { benchNodeArgs } from '../platform';
import { measureReplay } from '../replay';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const reuse = process.env['KEEP'];
  const prefix = reuse ?? `dbg${Date.now().toString(36)}`;
  console.log(`PREFIX ${prefix}`);
  try {
    if (!reuse) {
      // As the debug platform: closed-loop runs hop far past the watchdog's default hop budget.
      const services = await startPlatform(
        { BATON_PREFIX: prefix, LOG_LEVEL: 'warn', BATON_NATS_AUTH: 'none', WATCHDOG_MAX_HOPS: '100000' },
        { nodeArgs: benchNodeArgs },
      );
      try {
        await publishCycleDefinition(nats, prefix, 'bench');
        const seconds = Number(process.env['SECONDS'] ?? 20);
        await measureHops({
          nats,
          redis: redis.client,
          prefix,
          project: 'bench',
          runs: 32,
          warmupSeconds: 1,
          throughputSeconds: seconds,
          latencySeconds: 1,
          log: (l) => console.log(l),
        });
        await waitQuiet(nats, prefix, 120_000);
      } finally {
        for (const s of services) await stopService(s);
      }
    }
    for (let i = 0; i < Number(process.env['ROUNDS'] ?? 1); i++) console.log(JSON.stringify(await measureReplay(nats, redis.client, prefix)));
  } finally {
    if (!process.env['LEAVE']) await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
