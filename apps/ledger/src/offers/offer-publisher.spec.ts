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
