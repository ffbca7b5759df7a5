import { headers as natsHeaders } from 'nats';
import { createEventRegistry } from '@baton/contracts';
import { connectNats, provision, batonTopology, batonStreamNames } from '@baton/eventstore';
import { JsonLogger } from '@baton/platform';
import { DeadlineTracker } from './deadlines/deadline-tracker';

it('bench rebuild', async () => {
  const nats = await connectNats({ reconnect: false });
  const prefix = 'wdbench' + Date.now();
  await provision(nats.jsm, { streams: batonTopology(prefix, { storage: 'memory' }).streams });
  const enc = new TextEncoder();
  const N = 100_000;
  const t0 = Date.now();
  let pubs: Promise<unknown>[] = [];
  const env = (id: string, type: string, payload: object, i: number) => enc.encode(JSON.stringify({ id: `${id}-${i}`, type, version: 1, aggregate: { kind: 'handoff', id }, project: 'proj', occurredAt: '2026-01-01T00:00:00.000Z', actor: 'bob', origin: 'agent', causationId: null, correlationId: id, payload }));
  for (let i = 0; i < N; i++) {
    const id = `h-${i}`;
    const subject = `${prefix}.ev.proj.handoff.${id}`;
    const h1 = natsHeaders(); h1.set('Baton-Event-Type', 'handoff.claimed');
    pubs.push(nats.js.publish(subject, env(id, 'handoff.claimed', { handoff_id: id, at: '2026-01-01T00:00:00.000Z', idempotency_key: 'k1', claimed_by: 'bob', claim_id: `c-${i}`, lease_expires_at: '2026-01-01T00:01:00.000Z' }, 1), { headers: h1 }));
    const h2 = natsHeaders(); h2.set('Baton-Event-Type', 'handoff.heartbeat');
    pubs.push(nats.js.publish(subject, env(id, 'handoff.heartbeat', { handoff_id: id, at: '2026-01-01T00:00:00.000Z', idempotency_key: 'k2', claim_id: `c-${i}`, lease_expires_at: '2026-01-01T00:02:00.000Z' }, 2), { headers: h2 }));
    if (i % 2 === 0) {
      const h3 = natsHeaders(); h3.set('Baton-Event-Type', 'handoff.released');
      pubs.push(nats.js.publish(subject, env(id, 'handoff.released', { handoff_id: id, at: '2026-01-01T00:00:00.000Z', idempotency_key: 'k3', claim_id: `c-${i}`, released_by: 'bob', reason: 'x' }, 3), { headers: h3 }));
    }
    if (pubs.length > 5000) { await Promise.all(pubs); pubs = []; }
  }
  await Promise.all(pubs);
  console.log('published', Date.now() - t0, 'ms');
  const before = process.memoryUsage().heapUsed;
  const tracker = new DeadlineTracker({ js: nats.js, stream: batonStreamNames(prefix).events, prefix, registry: createEventRegistry(), logger: new JsonLogger('wd', 'error') });
  const t1 = Date.now();
  await tracker.start();
  await tracker.caughtUp();
  console.log('rebuilt', Date.now() - t1, 'ms', tracker.status(), 'heap delta MB', ((process.memoryUsage().heapUsed - before) / 1e6).toFixed(1));
  await tracker.stop();
  for (const s of Object.values(batonStreamNames(prefix))) await nats.jsm.streams.delete(s).catch(() => 0);
  await nats.close();
}, 180000);
