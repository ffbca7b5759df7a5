import { createServer, type AddressInfo } from 'node:net';
import { EventStoreError } from '@baton/eventstore';
import { createBatonClient } from './client';

/** A loopback port with nobody listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('createBatonClient: what it throws before there is a client', () => {
  it('a server it cannot reach is an EventStoreError (store_error), as the errors table says, not the NATS client’s own error', async () => {
    const port = await closedPort();
    const failure = await createBatonClient({ natsUrl: `nats://127.0.0.1:${port}`, project: 'shop', agent: 'alice' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(EventStoreError);
    expect(failure).toMatchObject({ code: 'store_error', message: expect.stringContaining(`127.0.0.1:${port}`) });
  });

  it('a bad option is refused before connecting: nothing is left open behind the refusal', async () => {
    const port = await closedPort();
    // Had it connected first, the failure would be the connection's, not the option's.
    const failure = await createBatonClient({ natsUrl: `nats://127.0.0.1:${port}`, project: 'shop', agent: 'alice', sentIdsCapacity: 0 }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(RangeError);
  });
});
