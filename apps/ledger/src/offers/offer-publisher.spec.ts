import type { ServiceRuntime } from '@baton/platform';
import type { ProjectControlService } from '../governance/project-control.service';
import { OfferPublisher } from './offer-publisher';

/*
 * The wait between a create and the reactor (no I/O: these methods touch neither NATS nor the
 * control state, so the publisher is built without them). What the offers themselves do against a
 * real server is proven in ledger.int-spec.ts ("a create offers the new handoff before it answers…").
 */
describe('OfferPublisher: the reactor waits for a create of the same handoff running in its process', () => {
  const publisher = () => new OfferPublisher({} as ServiceRuntime, {} as ProjectControlService);
  const state = (promise: Promise<void>) => {
    let settled = false;
    void promise.then(() => (settled = true));
    return () => settled;
  };
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('nothing to wait for when no create of the handoff runs', () => {
    const offers = publisher();
    expect(offers.createSettled('p', 'h-1')).toBeUndefined();
    const done = offers.beginCreate('p', 'h-1');
    expect(offers.createSettled('p', 'h-2')).toBeUndefined();
    expect(offers.createSettled('q', 'h-1')).toBeUndefined();
    done();
  });

  it('a running create is waited for until it has answered, then forgotten', async () => {
    const offers = publisher();
    const done = offers.beginCreate('p', 'h-1');
    const settled = state(offers.createSettled('p', 'h-1')!);
    await turn();
    expect(settled()).toBe(false);
    done();
    await turn();
    expect(settled()).toBe(true);
    expect(offers.createSettled('p', 'h-1')).toBeUndefined();
  });

  it('two creates of one handoff (a retry racing the first): waited for until both answered', async () => {
    const offers = publisher();
    const first = offers.beginCreate('p', 'h-1');
    const second = offers.beginCreate('p', 'h-1');
    const settled = state(offers.createSettled('p', 'h-1')!);
    first();
    await turn();
    expect(settled()).toBe(false);
    expect(offers.createSettled('p', 'h-1')).toBeDefined();
    second();
    await turn();
    expect(settled()).toBe(true);
    expect(offers.createSettled('p', 'h-1')).toBeUndefined();
  });
});

describe("OfferPublisher: a create's pause check is read while it stores (readPause)", () => {
  const logger = { info: () => undefined } as unknown as ServiceRuntime['logger'];
  const pending = { id: 'h-1', project: 'p', status: 'pending', to_agent: 'bob' } as unknown as Parameters<OfferPublisher['offerCreated']>[1];

  it('the offer uses the read started with the create: held when it said paused, and the state is not read again', async () => {
    const reads: string[] = [];
    const control = { isPaused: async (project: string) => (reads.push(project), true) } as unknown as ProjectControlService;
    const offers = new OfferPublisher({ logger } as ServiceRuntime, control);
    const paused = offers.readPause('p');
    expect(reads).toEqual(['p']);
    expect(await offers.offerCreated('ev-1', pending, 7, undefined, paused)).toBe('held');
    expect(reads).toEqual(['p']);
    expect(offers.offeredAhead('ev-1')).toBe(false);
  });

  it('a read that failed fails the offer that awaits it (left to the reactor), and is not an unhandled rejection before', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const control = { isPaused: async () => Promise.reject(new Error('control state unreadable')) } as unknown as ProjectControlService;
      const offers = new OfferPublisher({ logger } as ServiceRuntime, control);
      const paused = offers.readPause('p');
      // The create's append takes a while: the failed read waits, handled, for the offer.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
      await expect(offers.offerCreated('ev-2', pending, 8, undefined, paused)).rejects.toThrow('control state unreadable');
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
