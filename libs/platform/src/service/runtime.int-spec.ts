import { randomBytes } from 'node:crypto';
import { Subjects } from '@baton/contracts';
import { batonStreamNames, connectNats, ProvisionError, type NatsHandle } from '@baton/eventstore';
import { StorageType } from 'nats';
import { loadConfig } from '../config/config';
import { ServiceConfigSchema } from './bootstrap';
import { createRuntime } from './runtime';

/*
 * A start that fails at provisioning (a stream made by something else, with a storage Baton cannot
 * change) against the real NATS: the error says so, and the connection the start opened is closed —
 * an in-process caller that catches the error keeps no socket reconnecting behind it.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const sockets = () => process.getActiveResourcesInfo().filter((kind) => kind === 'TCPSocketWrap').length;

describe('createRuntime when provisioning fails (real NATS)', () => {
  const prefix = `rt${randomBytes(5).toString('hex')}`;
  const events = batonStreamNames(prefix).events;
  let nats: NatsHandle;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    // The events stream as another tool made it: in memory, where Baton's is on file (immutable).
    await nats.jsm.streams.add({ name: events, subjects: [Subjects.events(prefix)], storage: StorageType.Memory });
  });

  afterAll(async () => {
    for (const name of Object.values(batonStreamNames(prefix))) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.close();
  });

  it('throws the ProvisionError and leaves no connection open', async () => {
    const before = sockets();
    const config = loadConfig(ServiceConfigSchema, { NATS_URL, BATON_PREFIX: prefix, BATON_NATS_AUTH: 'none', HTTP_PORT: '0', LOG_LEVEL: 'error' });
    const failed = await createRuntime({ service: 'probe', config, redis: false }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(ProvisionError);
    expect((failed as Error).message).toContain('storage');
    // The socket handle goes once the kernel has closed it: a moment after the close resolves.
    // Left open, it would stay for good (the client keeps a connection it was not told to close).
    const deadline = Date.now() + 3_000;
    while (sockets() > before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sockets()).toBe(before);
  });
});
