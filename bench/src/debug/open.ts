// Diagnosis tool (not part of `npm run bench`): create N open handoffs and print each service's
// resident memory and each consumer's backlog every 5 s.
//   N=100000 node dist/bench/src/debug/open.js
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, startPlatform, stopService, waitQuiet } from '@baton/testing';
import { publishDefinition } from '../baton';
import { createOpenHandoffs } from '../open-handoffs';
import { benchNodeArgs, rssMb } from '../platform';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform({ BATON_PREFIX: prefix, LOG_LEVEL: 'warn', BATON_NATS_AUTH: 'none' }, { nodeArgs: benchNodeArgs() });
  try {
    await publishDefinition(nats, prefix, 'bench');
    const n = Number(process.env['N'] ?? 20000);
    const timer = setInterval(() => {
      void (async () => {
        const pend: Record<string, number> = {};
        for (const stream of [`${prefix.toUpperCase()}_EVENTS`, `${prefix.toUpperCase()}_INBOX`])
          for await (const c of nats.jsm.consumers.list(stream)) if (c.config.durable_name) pend[c.config.durable_name] = c.num_pending + c.num_ack_pending;
        console.log(JSON.stringify(Object.fromEntries(services.map((s) => [s.name, rssMb(s.child.pid)]))), JSON.stringify(pend));
      })();
    }, 5000);
    const r = await createOpenHandoffs(nats, prefix, 'bench', n, () => waitQuiet(nats, prefix, 600_000));
    clearInterval(timer);
    console.log(r, Object.fromEntries(services.map((s) => [s.name, rssMb(s.child.pid)])));
  } finally {
    for (const s of services) await stopService(s);
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
