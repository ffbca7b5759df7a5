import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { advanceResult, onOffers, publishDefinition, publishResult, startRun, VisibilityWatcher } from '../baton';
import { cleanupDeployment, startPlatform, stopService } from '../platform';
import { nowMs, percentile, sleep } from '../stats';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform({ BATON_PREFIX: prefix, LOG_LEVEL: 'warn', WATCHDOG_MAX_HOPS: '100000' });
  const runs = Number(process.env['RUNS'] ?? 4);
  try {
    await publishDefinition(nats, prefix, 'bench');
    const watcher = new VisibilityWatcher(redis.client, prefix, 1, nowMs);
    const pub = new Map<string, number>(); const lagOffer: number[] = []; const lagVis: number[] = [];
    const n = new Map<string, number>();
    let done = 0; let stop = false;
    onOffers(nats, prefix, 'bench', (o) => {
      const at = nowMs(); const p = pub.get(o.runId);
      void watcher.visible(o.seq).then((v) => {
        if (p !== undefined) { lagOffer.push(at - p); lagVis.push(v - at); done++; }
        if (stop) return;
        const k = (n.get(o.runId) ?? 0) + 1; n.set(o.runId, k);
        pub.set(o.runId, nowMs());
        void publishResult(nats, prefix, advanceResult('bench', o.runId, o.agent, k, o.handoffId));
      });
    });
    for (let i = 0; i < runs; i++) await startRun(nats, prefix, 'bench', `v${i}`);
    await sleep(8000); stop = true; await sleep(1000);
    console.log('hops', done, 'publish→offer p50', percentile(lagOffer, 50).toFixed(1), 'p90', percentile(lagOffer, 90).toFixed(1), '| offer→visible p50', percentile(lagVis, 50).toFixed(1), 'p90', percentile(lagVis, 90).toFixed(1));
    await watcher.stop();
  } finally {
    for (const s of services) await stopService(s);
    for (const s of services) { const lines = s.output.join('').split('\n').filter((l) => l.includes('"level":"warn"') || l.includes('"level":"error"')); console.log(s.name, lines.length, lines.slice(0, 3).join('\n').slice(0, 600)); }
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}
void main();
