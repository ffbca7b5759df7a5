import { runConsumer } from './runner';
import { provision } from './provision';
import { batonStreamNames } from './topology';
import { connectTest, deleteTopology, provisionTopology, randomPrefix, sleep } from './int/support';
it('dbg', async () => {
  const prefix = randomPrefix();
  const nats = await connectTest();
  await provisionTopology(nats, prefix);
  const inbox = batonStreamNames(prefix).inbox;
  await provision(nats.jsm, { consumers: [{ stream: inbox, durable: 'x', filterSubject: `${prefix}.in.>` }] });
  const r = runConsumer({ js: nats.js, stream: inbox, prefix, durable: 'x', pullExpiresMs: 500, onError: (e) => console.log('ERR', e), onOutcome: (o) => console.log(o.kind), handler: async (m) => console.log('got', m.subject) });
  await nats.js.publish(`${prefix}.in.a`, new Uint8Array([1]));
  await sleep(1500);
  console.log(await nats.jsm.consumers.info(inbox, 'x'));
  await r.stop();
  await deleteTopology(nats, prefix);
  await nats.close();
});
