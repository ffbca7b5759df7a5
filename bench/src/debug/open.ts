// Diagnosis tool (not part of `npm run bench`): create N open handoffs and print each service's
// resident memory and each consumer's backlog every 5 s.
//   N=100000 node dist/bench/src/debug/open.js
// HOLD=30 keeps the platform idle 30 s afterwards, still printing (how memory settles when idle).
import { consumerInfos } from '@baton/eventstore';
import { waitQuiet } from '@baton/testing';
import { createOpenHandoffs } from '../open-handoffs';
import { rssMb } from '../platform';
import { withDebugPlatform } from './platform';

void withDebugPlatform(async ({ nats, prefix, services }) => {
  const n = Number(process.env['N'] ?? 20000);
  const timer = setInterval(() => {
    void (async () => {
      const pend: Record<string, number> = {};
      for (const stream of [`${prefix.toUpperCase()}_EVENTS`, `${prefix.toUpperCase()}_INBOX`])
        for await (const c of consumerInfos(nats.jsm, stream)) if (c.config.durable_name) pend[c.config.durable_name] = c.num_pending + c.num_ack_pending;
      console.log(JSON.stringify(Object.fromEntries(services.map((s) => [s.name, rssMb(s.child.pid)]))), JSON.stringify(pend));
    })();
  }, 5000);
  try {
    const r = await createOpenHandoffs(nats, prefix, 'bench', n, () => waitQuiet(nats, prefix, 600_000));
    console.log(r, Object.fromEntries(services.map((s) => [s.name, rssMb(s.child.pid)])));
    await new Promise((resolve) => setTimeout(resolve, Number(process.env['HOLD'] ?? 0) * 1000));
  } finally {
    clearInterval(timer);
  }
});
