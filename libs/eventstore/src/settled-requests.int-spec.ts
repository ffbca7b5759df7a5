import { ErrorCode, NatsError } from 'nats';
import type { NatsHandle } from './connection';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import { skipSettledCancelErrors } from './settled-requests';
import { batonStreamNames } from './topology';

/*
 * The client used to build a "cancelled" error after every request that succeeded (and throw it
 * away). With the patch (applied by connectNats), a settled request builds none; every outcome a
 * caller sees is unchanged: the reply, a timeout, no responders, a point read that finds nothing.
 */
describe('requests that settled build no cancelled error (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  const built: string[] = [];
  const errorForCode = NatsError.errorForCode.bind(NatsError);

  beforeAll(async () => {
    prefix = randomPrefix();
    nats = await connectTest('settled-requests');
    await provisionTopology(nats, prefix);
    NatsError.errorForCode = (code: string, chained?: Error) => {
      built.push(code);
      return errorForCode(code, chained);
    };
  });

  afterAll(async () => {
    NatsError.errorForCode = errorForCode;
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  it('is on, once per process, and the reply is the reply', async () => {
    expect(skipSettledCancelErrors()).toEqual({ on: true });
    const sub = nats.connection.subscribe(`${prefix}.echo`, { callback: (_err, msg) => msg.respond(msg.data) });
    built.length = 0;
    for (let i = 0; i < 50; i++) {
      const reply = await nats.connection.request(`${prefix}.echo`, new TextEncoder().encode(`n${i}`), { timeout: 2000 });
      expect(new TextDecoder().decode(reply.data)).toBe(`n${i}`);
    }
    // A JetStream API call and a point read are single-reply requests too.
    const names = batonStreamNames(prefix);
    await nats.js.publish(`${prefix}.ev.p.run.r1`, new TextEncoder().encode('{}'));
    expect((await nats.jsm.streams.getMessage(names.events, { last_by_subj: `${prefix}.ev.p.run.r1` })).seq).toBeGreaterThan(0);
    expect(built.filter((code) => code === ErrorCode.Cancelled)).toEqual([]);
    sub.unsubscribe();
  });

  it('a request nobody answers in time still times out, and one nobody listens to still has no responders', async () => {
    const silent = nats.connection.subscribe(`${prefix}.silent`, { callback: () => undefined });
    await nats.connection.flush();
    await expect(nats.connection.request(`${prefix}.silent`, new Uint8Array(0), { timeout: 200 })).rejects.toMatchObject({ code: ErrorCode.Timeout });
    await expect(nats.connection.request(`${prefix}.nobody`, new Uint8Array(0), { timeout: 2000 })).rejects.toMatchObject({ code: ErrorCode.NoResponders });
    // A point read that finds nothing is still the server's answer, not a cancellation.
    await expect(nats.jsm.streams.getMessage(batonStreamNames(prefix).events, { last_by_subj: `${prefix}.ev.p.run.none` })).rejects.toMatchObject({
      api_error: { err_code: 10037 },
    });
    silent.unsubscribe();
  });
});
