// Diagnosis tool (not part of `npm run bench`): the growth phase alone (one run grown to
// LONG events by the router itself), then every warn/error line the services logged. HOPS=1 runs
// the hop phase first, on the same platform and project, as the bench does; SAME_PROJECT=1 grows
// the runs in that project too (the bench gives them one of their own). On a failure it prints
// the failed run's last events and the dead letters.
//   HOPS=1 LONG=10000 SAMPLES=30 node dist/bench/src/debug/growth.js
import { publishCycleDefinition, waitQuiet } from '@baton/testing';
import { measureGrowth } from '../growth';
import { measureHops } from '../hops';
import { accountedTargets, readCpu } from '../platform';
import { withDebugPlatform } from './platform';

void withDebugPlatform(async ({ nats, redis, prefix, services }) => {
  try {
    if (process.env['HOPS']) {
      // As the bench does: the hop phase first, on the same platform and project.
      await measureHops({
        nats,
        redis: redis.client,
        prefix,
        project: 'bench',
        runs: 128,
        warmupSeconds: 3,
        throughputSeconds: 15,
        latencySeconds: 15,
        log: console.log,
        cpu: () => readCpu(accountedTargets(services)),
      });
      await waitQuiet(nats, prefix, 60_000);
    }
    const growthProject = process.env['SAME_PROJECT'] ? 'bench' : 'bench-growth';
    if (growthProject !== 'bench') await publishCycleDefinition(nats, prefix, growthProject);
    const result = await measureGrowth({
      nats,
      prefix,
      project: growthProject,
      longEvents: Number(process.env['LONG'] ?? 6000),
      shortEvents: 10,
      samples: Number(process.env['SAMPLES'] ?? 5),
      quiesce: () => waitQuiet(nats, prefix, 60_000),
      settle: () => waitQuiet(nats, prefix, 10_000, { rounds: 1 }),
      log: console.log,
    });
    console.log(JSON.stringify(result));
  } catch (error) {
    console.log('FAILED', error);
    const failed = /for ([^/]+)\/([^ ]+) within/.exec(String(error));
    if (failed) {
      // The failed run's last events, and every dead letter.
      const events: string[] = [];
      const stream = `${prefix.toUpperCase()}_EVENTS`;
      const last = await nats.jsm.streams.info(stream);
      for (let seq = last.state.last_seq; seq > Math.max(0, last.state.last_seq - 400) && events.length < 20; seq--) {
        const m = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
        if (m && m.subject.endsWith(`.${failed[1]}`)) events.push(`#${seq} ${new TextDecoder().decode(m.data).slice(0, 500)}`);
      }
      console.log(`--- last events of ${failed[1]}:\n${events.join('\n')}`);
      const dlq = await nats.jsm.streams.info(`${prefix.toUpperCase()}_DLQ`).catch(() => null);
      console.log(`--- dead letters: ${dlq?.state.messages ?? 'none'}`);
      for (let seq = 1; dlq && seq <= Math.min(dlq.state.last_seq, 10); seq++) {
        const m = await nats.jsm.streams.getMessage(`${prefix.toUpperCase()}_DLQ`, { seq }).catch(() => null);
        if (m) console.log(m.subject, JSON.stringify(Object.fromEntries([...m.header.keys()].map((k) => [k, m.header.get(k)]))).slice(0, 600));
      }
    }
  }
});
