// Diagnosis tool (not part of `npm run bench`): the growth phase alone (one run grown to
// LONG events by the router itself), then every warn/error line the services logged.
//   LONG=6000 LL=info node dist/bench/src/debug/growth.js
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, startPlatform, stopService, waitQuiet } from '@baton/testing';
import { publishDefinition } from '../baton';
import { measureGrowth } from '../growth';
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
    if (growthProject !== 'bench') await publishDefinition(nats, prefix, growthProject);
    const result = await measureGrowth({
      nats,
      prefix,
      project: growthProject,
      longEvents: Number(process.env['LONG'] ?? 6000),
      shortEvents: 10,
      samples: 5,
      quiesce: () => waitQuiet(nats, prefix, 60_000),
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
  } finally {
    for (const s of services) await stopService(s);
    for (const s of services) {
      const lines = s.output
        .join('')
        .split('\n')
        .filter((l) => l.includes('"level":"warn"') || l.includes('"level":"error"'));
      console.log(`--- ${s.name}: ${lines.length} warn/error lines`);
      for (const l of lines.slice(0, 12)) console.log(l.slice(0, 600));
      for (const l of lines.slice(-6)) console.log(l.slice(0, 600));
    }
    if (!process.env['KEEP']) await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
