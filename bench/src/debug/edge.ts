// Diagnosis tool (not part of `npm run bench`): how long one consumer step takes when the machine
// is idle — a message stored on one stream, delivered by `runConsumer`, its handler publishing to
// a second stream — from the two stored messages' server timestamps, next to the same step with
// the NATS client's own pull loop (`consume`). RATE messages/s for SECS seconds. First, a core
// request and reply between two connections, back to back and with 5 and 50 ms between requests
// (what waking idle processes adds to a round trip).
//   RATE=20 SECS=5 node dist/bench/src/debug/edge.js
import { connectNats, runConsumer } from '@baton/eventstore';
import { percentile } from '../stats';

const rate = Number(process.env['RATE'] ?? 20);
const secs = Number(process.env['SECS'] ?? 5);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false, coalesceWrites: process.env['COALESCE'] !== '0' });
  // connectNats coalesces writes (COALESCE=0: off)
  const tag = `edge${Date.now().toString(36)}`;
  const a = `${tag}_A`;
  await nats.jsm.streams.add({ name: a, subjects: [`${tag}.a`] });
  for (const mode of ['runner', 'consume']) await nats.jsm.streams.add({ name: `${tag}_B_${mode}`, subjects: [`${tag}.b.${mode}`] });
  try {
    const responder = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
    responder.connection.subscribe(`${tag}.echo`, { callback: (_err, m) => m.respond(m.data) });
    await responder.connection.flush();
    for (const gap of [0, 5, 50]) {
      const rtt: number[] = [];
      for (let i = 0; i < 200; i++) {
        const t = performance.now();
        await nats.connection.request(`${tag}.echo`, new Uint8Array(16));
        rtt.push(performance.now() - t);
        if (gap > 0) await sleep(gap);
      }
      console.log(`request ${String(gap).padStart(2)} ms apart`, 'p50', percentile(rtt, 50).toFixed(2), 'p90', percentile(rtt, 90).toFixed(2), 'ms');
    }
    await responder.close();
    for (const mode of ['runner', 'consume'] as const) {
      const durable = `${mode}`;
      await nats.jsm.consumers.add(a, { durable_name: durable, ack_policy: 'explicit' as never });
      const handler = async (seq: number) => {
        await nats.js.publish(`${tag}.b.${mode}`, new TextEncoder().encode(String(seq)));
      };
      let stop: () => Promise<void>;
      if (mode === 'runner') {
        const r = runConsumer({ js: nats.js, stream: a, durable, prefix: tag, handler: (m) => handler(m.seq), deadLetters: false });
        stop = () => r.stop();
      } else {
        const c = await nats.js.consumers.get(a, durable);
        const it = await c.consume({ max_messages: 100 });
        void (async () => {
          for await (const m of it) {
            await handler(m.seq);
            m.ack();
          }
        })();
        stop = async () => void (await it.close());
      }
      await sleep(300);
      const first = (await nats.jsm.streams.info(a)).state.last_seq;
      const end = Date.now() + secs * 1000;
      while (Date.now() < end) {
        await nats.js.publish(`${tag}.a`, new Uint8Array(8));
        await sleep(1000 / rate);
      }
      await sleep(500);
      await stop();
      const stored = new Map<number, number>();
      const ca = await nats.js.consumers.get(a);
      const last = (await nats.jsm.streams.info(a)).state.last_seq;
      for await (const m of await ca.fetch({ max_messages: last, expires: 3000 })) {
        if (m.seq > first) stored.set(m.seq, m.info.timestampNanos / 1e6);
        if (m.seq >= last) break;
      }
      const lat: number[] = [];
      const cb = await nats.js.consumers.get(`${tag}_B_${mode}`);
      const n = (await nats.jsm.streams.info(`${tag}_B_${mode}`)).state.messages;
      let got = 0;
      for await (const m of await cb.fetch({ max_messages: n, expires: 3000 })) {
        const s = Number(new TextDecoder().decode(m.data));
        const t = stored.get(s);
        if (t !== undefined) lat.push(m.info.timestampNanos / 1e6 - t);
        if (++got >= n) break;
      }
      console.log(
        mode.padEnd(8),
        'n',
        lat.length,
        'p50',
        percentile(lat, 50).toFixed(2),
        'p90',
        percentile(lat, 90).toFixed(2),
        'p99',
        percentile(lat, 99).toFixed(2),
        'ms',
      );
    }
  } finally {
    await nats.jsm.streams.delete(a);
    for (const mode of ['runner', 'consume']) await nats.jsm.streams.delete(`${tag}_B_${mode}`);
    await nats.close();
  }
}
void main();
