import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, rssMb, startPlatform, stopService } from '../platform';
import { sleep } from '../stats';

async function main() {
  const nats = await connectNats({ servers: 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis('redis://127.0.0.1:6379');
  const prefix = `dbg${Date.now().toString(36)}`;
  const services = await startPlatform({ BATON_PREFIX: prefix, LOG_LEVEL: 'warn' });
  await sleep(3000);
  console.log(Object.fromEntries(services.map((s) => [s.name, rssMb(s.child.pid)])));
  for (const s of services) await stopService(s);
  await cleanupDeployment(nats, redis.client, prefix);
  await redis.close();
  await nats.close();
}
void main();
