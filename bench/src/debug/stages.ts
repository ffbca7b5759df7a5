// Diagnosis tool (not part of `npm run bench`): where a hop's time goes, from the stored messages'
// server timestamps (result stored → recorded → routed → handoff created → offer stored).
//   RUNS=64 node dist/bench/src/debug/stages.js
// OPEN=1 keeps only the open loop's hops (the latency phase, RATE hops/s for LSECS seconds,
// default half the closed loop's rate for 10 s).
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { percentile } from '../stats';
import { measureDebugHops, withDebugPlatform } from './platform';

const dec = new TextDecoder();
async function readAll(nats: NatsHandle, stream: string) {
  const out: Array<{ seq: number; subject: string; ts: number; data: string; hdr: Record<string, string> }> = [];
  const info = await nats.jsm.streams.info(stream);
  const c = await nats.js.consumers.get(stream);
  const it = await c.fetch({ max_messages: info.state.messages, expires: 5000 });
  for await (const m of it) {
    const hdr: Record<string, string> = {};
    for (const [k, v] of m.headers ?? []) hdr[k] = v[0] ?? '';
    out.push({ seq: m.seq, subject: m.subject, ts: m.info.timestampNanos / 1e6, data: dec.decode(m.data), hdr });
    if (m.seq >= info.state.last_seq) break;
  }
  return out;
}

const lsecs = Number(process.env['LSECS'] ?? 10);
const openOnly = process.env['OPEN'] === '1';

void withDebugPlatform(async (platform) => {
  const { nats, prefix } = platform;
  const result = await measureDebugHops(platform, {
    latencySeconds: lsecs,
    ...(process.env['RATE'] ? { latencyRate: Number(process.env['RATE']) } : {}),
  });
  console.log(result.hops_per_s, 'hops/s; open loop', result.offered_rate, 'hops/s', JSON.stringify(result.latency));
  const openFrom = Date.now() - lsecs * 1000 + 1000;
  const names = batonStreamNames(prefix);
  const inbox = await readAll(nats, names.inbox);
  const events = await readAll(nats, names.events);
  const resultAt = new Map<string, number>();
  for (const m of inbox) if (m.subject.includes('.result.') && (!openOnly || m.ts >= openFrom)) resultAt.set(JSON.parse(m.data).result_id, m.ts);
  const offerAt = new Map<string, number>();
  for (const m of inbox) if (m.subject.includes('.offer.')) offerAt.set(m.hdr['Baton-Handoff-Id'] ?? '', m.ts);
  const recorded = new Map<string, number>();
  const routed = new Map<string, { ts: number; handoff: string }>();
  const created = new Map<string, number>();
  const completed = new Map<string, number>();
  for (const e of events) {
    const env = JSON.parse(e.data);
    if (env.type === 'run.result_recorded') recorded.set(env.payload.result_id, e.ts);
    if (env.type === 'run.routed' && env.payload.cause.kind === 'result') routed.set(env.payload.cause.id, { ts: e.ts, handoff: env.payload.handoff_id });
    if (env.type === 'handoff.created') created.set(env.aggregate.id, e.ts);
    if (env.type === 'handoff.completed_by_result') completed.set(env.payload.result_id, e.ts);
  }
  const d = {
    inbox_to_recorded: [] as number[],
    recorded_to_routed: [] as number[],
    routed_to_created: [] as number[],
    created_to_offer: [] as number[],
    inbox_to_offer: [] as number[],
    recorded_to_completed: [] as number[],
  };
  for (const [rid, t0] of resultAt) {
    const r = recorded.get(rid);
    const ro = routed.get(rid);
    if (!r || !ro) continue;
    d.inbox_to_recorded.push(r - t0);
    d.recorded_to_routed.push(ro.ts - r);
    const c = created.get(ro.handoff);
    if (c) d.routed_to_created.push(c - ro.ts);
    const o = offerAt.get(ro.handoff);
    if (o && c) d.created_to_offer.push(o - c);
    if (o) d.inbox_to_offer.push(o - t0);
    const cp = completed.get(rid);
    if (cp) d.recorded_to_completed.push(cp - r);
  }
  for (const [k, v] of Object.entries(d))
    console.log(k.padEnd(24), 'n', v.length, 'p50', percentile(v, 50).toFixed(1), 'p90', percentile(v, 90).toFixed(1), 'p99', percentile(v, 99).toFixed(1));
});
