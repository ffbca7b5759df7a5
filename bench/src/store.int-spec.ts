import { connectNats, type NatsHandle } from '@baton/eventstore';
import { readCpu } from './platform';
import { measureStore, storeSettings } from './store';

describe('the store phase (real NATS)', () => {
  let nats: NatsHandle;

  beforeAll(async () => {
    nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', name: 'bench-store-int', reconnect: false });
  });
  afterAll(async () => {
    await nats.close();
  });

  const streams = async () => {
    const names: string[] = [];
    for await (const info of nats.jsm.streams.list()) names.push(info.config.name);
    return names.filter((name) => name.startsWith('BENCHSTORE'));
  };

  it('appends in sequence and concurrently, reads the aggregate back, and deletes its stream', async () => {
    const before = await streams();
    const settings = { ...storeSettings(['--quick']), sequentialAppends: 30, aggregates: 4, appendsPerAggregate: 10, readEvents: 40, reads: 2 };
    const result = await measureStore({
      nats,
      settings,
      cpu: () => readCpu({ bench: { pid: process.pid, via: 'proc' }, gone: { pid: null, reason: 'not here' } }),
      log: () => undefined,
    });

    expect(result.sequential).toMatchObject({ appends: 30 });
    expect(result.sequential.appends_per_s).toBeGreaterThan(0);
    expect(result.concurrent).toMatchObject({ aggregates: 4, appends: 40, conflicts: 0 });
    expect(result.read).toMatchObject({ events: 40, reads: 2, interleave: 8 });
    expect(result.read.events_per_s).toBeGreaterThan(0);
    // About the chosen event size, plus subject and headers.
    expect(result.stored_bytes_per_event).toBeGreaterThan(1_024);
    expect(result.stored_bytes_per_event).toBeLessThan(1_600);
    // A process it could not read is null with its reason, never a number.
    expect(result.read.cpu_us['gone']).toBeNull();
    expect(result.read.cpu_not_measured['gone']).toBe('not here');
    expect(typeof result.read.cpu_us['bench']).toBe('number');
    expect(await streams()).toEqual(before);
  });
});
