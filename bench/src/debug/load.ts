// Diagnosis tool (not part of `npm run bench`): the closed/open-loop hop measurement alone, with
// each service's CPU per hop. Profile the services with
//   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" SECS=25 RUNS=64 node dist/bench/src/debug/load.js
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, startPlatform, stopService } from '@baton/testing';
import { publishDefinition } from '../baton';
import { measureHops } from '../hops';
import { accountedTargets, benchNodeArgs, readCpu } from '../platform';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform(
    { BATON_PREFIX: prefix, LOG_LEVEL: process.env['LL'] ?? 'warn', WATCHDOG_MAX_HOPS: '100000', BATON_NATS_AUTH: 'none' },
    { nodeArgs: benchNodeArgs() },
  );
  try {
    await publishDefinition(nats, prefix, 'bench');
    const result = await measureHops({
      nats,
      redis: redis.client,
      prefix,
      project: 'bench',
      runs: Number(process.env['RUNS'] ?? 64),
      warmupSeconds: 2,
      throughputSeconds: Number(process.env['SECS'] ?? 5),
      latencySeconds: 3,
      log: console.log,
      cpu: () => readCpu(accountedTargets(services)),
    });
    console.log(JSON.stringify(result));
  } finally {
    for (const s of services) await stopService(s);
    for (const s of services) {
      const lines = s.output
        .join('')
        .split('\n')
        .filter((l) => l.includes('"level":"warn"') || l.includes('"level":"error"'));
      console.log(`--- ${s.name}: ${lines.length} warn/error lines`);
      for (const l of lines.slice(0, 8)) console.log(l.slice(0, 400));
    }
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
