// Diagnosis tool (not part of `npm run bench`): every message the broker carries during a few
// slow hops (a `>` subscription on a connection of its own, timed on arrival), printed as one
// hop's timeline — which requests, reads, appends and deliveries make up a hop, and the gaps
// between them. The platform runs without NATS auth, as every tool of this folder.
//   RUNS=4 RATE=2 node dist/bench/src/debug/sniff.js
import { connectNats } from '@baton/eventstore';
import { measureHops } from '../hops';
import { withDebugPlatform } from './platform';

void withDebugPlatform(async ({ nats, redis, prefix }) => {
  const spy = (await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false })).connection;
  const seen: Array<{ at: number; subject: string; reply: string; size: number; body: string }> = [];
  const sub = spy.subscribe('>');
  void (async () => {
    for await (const m of sub) {
      const at = performance.now();
      const body = m.data.length > 0 && m.data.length < 4000 ? new TextDecoder().decode(m.data.subarray(0, 160)) : '';
      seen.push({ at, subject: m.subject, reply: m.reply ?? '', size: m.data.length, body });
    }
  })();
  await measureHops({
    nats,
    redis: redis.client,
    prefix,
    project: 'bench',
    runs: Number(process.env['RUNS'] ?? 4),
    warmupSeconds: 1,
    throughputSeconds: 2,
    latencySeconds: 4,
    latencyRate: Number(process.env['RATE'] ?? 2),
    log: () => undefined,
  });
  await spy.drain();
  // The last result publishes of the open loop: print the window from each to the next offer.
  const results = seen.map((s, i) => ({ s, i })).filter(({ s }) => s.subject.includes('.result.'));
  for (const { s, i } of results.slice(-Number(process.env['HOPS'] ?? 2))) {
    console.log(`--- hop at ${s.subject}`);
    const t0 = s.at;
    for (let j = i; j < seen.length; j++) {
      const m = seen[j] as (typeof seen)[number];
      if (m.at - t0 > Number(process.env['WINDOW'] ?? 60)) break;
      const subj = m.subject.replace(prefix, 'P');
      if (subj.includes('.heartbeat') || subj.startsWith('$JS.EVENT')) continue;
      console.log(`${(m.at - t0).toFixed(2).padStart(7)} ${subj.slice(0, 90).padEnd(90)} ${m.reply ? 'r' : ' '} ${String(m.size).padStart(5)} ${m.body.replace(/\s+/g, ' ').slice(0, 70)}`);
    }
  }
});
