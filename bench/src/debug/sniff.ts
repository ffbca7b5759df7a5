// Diagnosis tool (not part of `npm run bench`): every message the broker carries during a few
// slow hops (a `>` subscription on a connection of its own, timed on arrival), printed as one
// hop's timeline — which requests, reads, appends and deliveries make up a hop, and the gaps
// between them. The platform runs without NATS auth, as every tool of this folder.
//   RUNS=4 RATE=2 node dist/bench/src/debug/sniff.js
// Then the count of each kind of message per hop over the open loop (RATE hops/s for LSECS s).
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
    latencySeconds: Number(process.env['LSECS'] ?? 4),
    latencyRate: Number(process.env['RATE'] ?? 2),
    log: () => undefined,
  });
  const ended = performance.now();
  await spy.drain();
  // Per hop over the open loop: every message by what it is (a delivery is a stored message sent
  // to a consumer: its reply subject is a $JS.ACK one; a publish of an event or an inbox message
  // waits for the store's ack on an _INBOX reply).
  const window = seen.filter((m) => m.at >= ended - Number(process.env['LSECS'] ?? 4) * 1000 + 500 && m.at <= ended - 300);
  const hops = window.filter((m) => m.subject.includes('.result.') && m.reply.startsWith('_INBOX')).length;
  const kinds = new Map<string, number>();
  for (const m of window) {
    const subject = m.subject.replace(prefix, 'P');
    const kind = subject.startsWith('$JS.API.STREAM.MSG.GET')
      ? 'direct get (request)'
      : subject.startsWith('$JS.API.CONSUMER.MSG.NEXT')
        ? 'pull request'
        : subject.startsWith('$JS.API.CONSUMER.INFO')
          ? 'consumer info (request)'
          : subject.startsWith('$JS.API')
            ? `other JetStream API: ${subject.split('.').slice(0, 4).join('.')}`
            : subject.startsWith('$JS.ACK')
              ? 'ack'
              : subject.startsWith('_INBOX')
                ? 'reply (to a get, publish, request)'
                : subject.startsWith('P.cmd.')
                  ? `request: ${subject.split('.').slice(-1)[0]}`
                  : m.reply.startsWith('$JS.ACK')
                    ? `delivery: ${subject.split('.')[1]}`
                    : m.reply.startsWith('_INBOX')
                      ? `stored publish: ${subject.split('.')[1]}`
                      : `other: ${subject.split('.').slice(0, 2).join('.')}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (kind.startsWith('direct get') || kind.startsWith('other: $JS.EVENT')) {
      // Who asked for what: the service (from its reply inbox) and the aggregate kind read.
      const who = /svc\.([a-z]+)\./.exec(m.reply)?.[1] ?? '?';
      const what = kind.startsWith('other')
        ? subject.split('.').slice(0, 5).join('.')
        : m.body
            .replace(/"[a-z_]*subj":"[^"]*\.ev\.[^.]+\.([a-z]+)\.[^"]*"/, '$1')
            .replace(/"seq":\d+/, 'seq')
            .replace(/[{}]/g, '');
      const detail = `  ${kind.startsWith('other') ? 'event' : 'get'} by ${who}: ${what}`;
      kinds.set(detail, (kinds.get(detail) ?? 0) + 1);
    }
  }
  console.log(`--- messages per hop over the open loop (${hops} hops)`);
  for (const [kind, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`${(n / Math.max(1, hops)).toFixed(2).padStart(7)}  ${kind}`);
  console.log(`${(window.length / Math.max(1, hops)).toFixed(2).padStart(7)}  in all`);
  // The last result publishes of the open loop: print the window from each to the next offer.
  const results = seen.map((s, i) => ({ s, i })).filter(({ s }) => s.subject.includes('.result.'));
  const shown = Number(process.env['HOPS'] ?? 2);
  for (const { s, i } of shown > 0 ? results.slice(-shown) : []) {
    console.log(`--- hop at ${s.subject}`);
    const t0 = s.at;
    for (let j = i; j < seen.length; j++) {
      const m = seen[j] as (typeof seen)[number];
      if (m.at - t0 > Number(process.env['WINDOW'] ?? 60)) break;
      const subj = m.subject.replace(prefix, 'P');
      if (subj.includes('.heartbeat') || subj.startsWith('$JS.EVENT')) continue;
      console.log(
        `${(m.at - t0).toFixed(2).padStart(7)} ${subj.slice(0, 90).padEnd(90)} ${m.reply ? 'r' : ' '} ${String(m.size).padStart(5)} ${m.body.replace(/\s+/g, ' ').slice(0, 70)}`,
      );
    }
  }
});
