import { EventStoreError } from '@baton/eventstore';
// Test only: the private servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort } from '../../eventstore/src/int/servers';
import { createBatonClient } from './client';

describe('createBatonClient: what it throws before there is a client', () => {
  it('a server it cannot reach is an EventStoreError (store_error), as the errors table says, not the NATS client’s own error', async () => {
    const port = await freePort(); // nobody listens on it
    const failure = await createBatonClient({ natsUrl: `nats://127.0.0.1:${port}`, project: 'shop', agent: 'alice' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(EventStoreError);
    expect(failure).toMatchObject({ code: 'store_error', message: expect.stringContaining(`127.0.0.1:${port}`) });
  });

  it('a bad option is refused before connecting: nothing is left open behind the refusal', async () => {
    const port = await freePort(); // nobody listens on it
    // Had it connected first, the failure would be the connection's, not the option's.
    const failure = await createBatonClient({ natsUrl: `nats://127.0.0.1:${port}`, project: 'shop', agent: 'alice', sentIdsCapacity: 0 }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(RangeError);
  });
});
