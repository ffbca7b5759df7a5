import { HttpException } from '@nestjs/common';
import { HealthController } from './health';

describe('/health/ready details', () => {
  it('carries the details a service provides, leaves out one that fails, and keeps them on a 503', async () => {
    const ok = new HealthController(
      [{ name: 'redis', check: async () => true }],
      [
        { name: 'projections', details: async () => ({ rebuilding: true }) },
        { name: 'broken', details: async () => Promise.reject(new Error('no')) },
      ],
    );
    expect(await ok.ready()).toEqual({ status: 'ready', checks: { redis: true }, details: { projections: { rebuilding: true } } });
    const down = new HealthController([{ name: 'redis', check: async () => false }], [{ name: 'projections', details: async () => ({ rebuilding: false }) }]);
    const error = (await down.ready().catch((e: unknown) => e)) as HttpException;
    expect(error.getStatus()).toBe(503);
    expect(error.getResponse()).toEqual({ status: 'not_ready', checks: { redis: false }, details: { projections: { rebuilding: false } } });
    // A service's own checks decide readiness with the platform's (the notifier's token revocation log).
    const extra = new HealthController([{ name: 'nats', check: async () => true }], undefined, undefined, [{ name: 'revocations', check: async () => false }]);
    const refused = (await extra.ready().catch((e: unknown) => e)) as HttpException;
    expect(refused.getStatus()).toBe(503);
    expect(refused.getResponse()).toEqual({ status: 'not_ready', checks: { nats: true, revocations: false } });
    // Without providers the answer is as before.
    expect(await new HealthController([{ name: 'nats', check: async () => true }]).ready()).toEqual({ status: 'ready', checks: { nats: true } });
  });
});
