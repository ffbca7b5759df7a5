// Diagnosis tool (not part of `npm run bench`): the closed/open-loop hop measurement alone, with
// each service's CPU per hop. Profile the services with
//   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" SECS=25 RUNS=64 node dist/bench/src/debug/load.js
import { measureDebugHops, withDebugPlatform } from './platform';

void withDebugPlatform(async (platform) => {
  const result = await measureDebugHops(platform, { throughputSeconds: Number(process.env['SECS'] ?? 5) });
  console.log(JSON.stringify(result));
});
