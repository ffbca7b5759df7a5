import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { advanceResult, onOffers, publishDefinition, publishResult, startRun, VisibilityWatcher } from '../baton';
import { cleanupDeployment, startPlatform, stopService } from '../platform';
import { nowMs, sleep } from '../stats';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform({ BATON_PREFIX: prefix, LOG_LEVEL: process.env['LL'] ?? 'info' });
  const t0 = nowMs();
  const log = (m: string) => console.log(`${(nowMs() - t0).toFixed(1)} ${m}`);
  try {
    await publishDefinition(nats, prefix, 'bench');
    const watcher = new VisibilityWatcher(redis.client, prefix, 1, nowMs);
    const offers: Array<{ handoffId: string; agent: string; seq: number }> = [];
    onOffers(nats, prefix, 'bench', (o) => { log(`offer ${o.handoffId} seq ${o.seq}`); offers.push(o); void watcher.visible(o.seq).then(() => log(`visible ${o.seq}`)); });
    await startRun(nats, prefix, 'bench', 'r1');
    log('started');
    while (offers.length < 1) await sleep(5);
    for (let n = 1; n <= 3; n++) {
      const o = offers.at(-1)!;
      log(`publish result ${n}`);
      await publishResult(nats, prefix, advanceResult('bench', 'r1', o.agent, n, o.handoffId));
      while (offers.length < n + 1) await sleep(2);
      await sleep(200);
    }
    await watcher.stop();
  } finally {
    for (const s of services) await stopService(s);
    for (const s of services) console.log(`--- ${s.name}\n` + s.output.join('').split('\n').filter((l) => l.includes('"level"')).map((l) => { try { const j = JSON.parse(l); return `${j.time} ${j.level} ${j.msg} ${j.event_id ?? ''} ${j.handoff_id ?? ''} ${j.error ?? ''} ${j.code ?? ''}`; } catch { return l; } }).join('\n'));
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
