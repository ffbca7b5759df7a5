import { AckPolicy, DeliverPolicy, nanos, StringCodec } from 'nats';
import { connectNats } from '@baton/eventstore';
import { freePort, removeServers, sleep, startNatsServer, type ServerProcess } from './harness';

it('ephemeral consumers after a node died', async () => {
  const nodes: ServerProcess[] = [];
  const cp = [await freePort(), await freePort(), await freePort()];
  const cl = [await freePort(), await freePort(), await freePort()];
  for (let i = 0; i < 3; i++) nodes.push(await startNatsServer({ name: `n${i + 1}`, port: cp[i]!, cluster: { port: cl[i]!, routes: cl.filter((_, j) => j !== i) } }));
  const urls = nodes.map((n) => n.url);
  let h = null;
  for (let i = 0; i < 60 && !h; i++) { h = await connectNats({ servers: urls, reconnect: false }).catch(() => null); if (!h) await sleep(500); }
  await h!.close();
  const nats = (await connectNats({ servers: [urls[0]!, urls[1]!] }))!;
  await nats.jsm.streams.add({ name: 'S', subjects: ['s.>'], num_replicas: 3 });
  for (let i = 0; i < 5; i++) await nats.js.publish('s.a', StringCodec().encode(String(i)));
  await nodes[2]!.stop('SIGKILL');
  await sleep(2000);
  for (const replicas of [1, 0]) {
    for (let i = 0; i < 6; i++) {
      const started = Date.now();
      const r = await nats.jsm.consumers.add('S', { name: `e${replicas}${i}`, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, mem_storage: replicas === 1, num_replicas: replicas, inactive_threshold: nanos(30000) }).then((info) => `ok leader=${info.cluster?.leader}`, (e) => `ERR ${String(e)}`);
      let fetched = '';
      if (r.startsWith('ok')) {
        const c = await nats.js.consumers.get('S', `e${replicas}${i}`).catch(() => null);
        if (c) { const b = await c.fetch({ max_messages: 5, expires: 5000 }); let n = 0; for await (const m of b) { n++; void m; } fetched = `fetched ${n}`; }
      }
      console.log(`replicas=${replicas} #${i}`, r, fetched, Date.now() - started, 'ms');
    }
  }
  await nats.close();
  await removeServers(nodes);
}, 180000);
