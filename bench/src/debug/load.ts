// Diagnosis tool (not part of `npm run bench`): the closed/open-loop hop measurement alone, with
// each service's CPU per hop. Profile the services with
//   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" SECS=25 RUNS=64 node dist/bench/src/debug/load.js
import { measureHops } from '../hops';
import { accountedTargets, readCpu } from '../platform';
import { withDebugPlatform } from './platform';

void withDebugPlatform(async ({ nats, redis, prefix, services }) => {
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
});
