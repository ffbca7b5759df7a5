// Diagnosis tool (not part of `npm run bench`): where a process allocates, for garbage collection's
// share of a profile. Preload it into the services and give it a folder:
//   ALLOC_PROF_DIR=/tmp/alloc BENCH_NODE_ARGS="-r ./dist/bench/src/debug/alloc-preload.js --max-semi-space-size=4 --max-old-space-size=96" \
//     SECS=20 RUNS=32 node dist/bench/src/debug/load.js
//   node dist/bench/src/debug/profile.js alloc /tmp/alloc/<pid>.heapprofile [top]
// It runs V8's sampling heap profiler keeping the samples of objects already collected (by default
// the profiler forgets them, and shows only what is still alive), so the profile counts every byte
// allocated, wherever it went since. The profile is written every ALLOC_PROF_EVERY seconds (default
// 10) and overwritten, so a process stopped by a signal leaves its last one.
import { Session } from 'node:inspector';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env['ALLOC_PROF_DIR'];
if (dir !== undefined && dir.length > 0) {
  mkdirSync(dir, { recursive: true });
  const session = new Session();
  session.connect();
  const file = join(dir, `${process.pid}.heapprofile`);
  session.post('HeapProfiler.startSampling', {
    samplingInterval: Number(process.env['ALLOC_PROF_INTERVAL'] ?? 16_384),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  const write = () =>
    session.post('HeapProfiler.getSamplingProfile', (error, result) => {
      if (error === null) writeFileSync(file, JSON.stringify({ argv: process.argv.slice(1), ...result.profile }));
    });
  setInterval(write, Number(process.env['ALLOC_PROF_EVERY'] ?? 10) * 1000).unref();
}
