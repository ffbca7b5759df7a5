import type { NatsHandle } from './connection';
import { ProvisionError } from './errors';
import { provision, retireConsumers } from './provision';
import { StorageType } from 'nats';
import { batonStreamNames, batonTopology, inboxSubjects, type TopologySpec } from './topology';
import { connectTest, deleteTopology, randomPrefix } from './int/support';

describe('provision (real NATS)', () => {
  let a: NatsHandle;
  let b: NatsHandle;
  let prefix: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    a = await connectTest('provision-a');
    b = await connectTest('provision-b');
  });

  afterEach(async () => {
    await deleteTopology(a, prefix);
    await a.close();
    await b.close();
  });

  const topology = (overrides: { ackWaitMs?: number; maxAgeMs?: number } = {}): TopologySpec => {
    const base = batonTopology(prefix, { storage: 'memory', inboxMaxAgeMs: overrides.maxAgeMs });
    const names = batonStreamNames(prefix);
    return {
      streams: base.streams,
      consumers: [
        { stream: names.inbox, durable: 'router-results', filterSubject: `${prefix}.in.*.result.*`, ackWaitMs: overrides.ackWaitMs ?? 30_000 },
        { stream: names.events, durable: 'notifier-all', ackWaitMs: overrides.ackWaitMs ?? 30_000 },
      ],
    };
  };

  it('a stream whose store the server failed to create (its own storage race) is created on a retry', async () => {
    // The server's refusal as the client reports it (err_code 10049, "error creating store for
    // stream"), for the first add only; the retry goes to the real server.
    let refused = 0;
    const add = a.jsm.streams.add.bind(a.jsm.streams);
    const jsm = Object.create(a.jsm) as typeof a.jsm;
    Object.defineProperty(jsm, 'streams', {
      value: Object.assign(Object.create(a.jsm.streams) as typeof a.jsm.streams, {
        add: (config: Parameters<typeof add>[0]) => {
          if (refused++ === 0)
            return Promise.reject(
              Object.assign(new Error('error creating store for stream'), {
                api_error: { code: 500, err_code: 10049, description: 'error creating store for stream' },
              }),
            );
          return add(config);
        },
      }),
    });
    const names = batonStreamNames(prefix);
    await expect(provision(jsm, { streams: topology().streams.filter((spec) => spec.name === names.dlq), consumers: [] })).resolves.toBeDefined();
    expect(refused).toBe(2);
    expect((await a.jsm.streams.info(names.dlq)).config.name).toBe(names.dlq);
  });

  it('a create refused for overlapping subjects because another instance just created the same stream (what nats-server 2.9.10 answers to that race) finds the stream and compares it', async () => {
    // The race as the server plays it: another instance's create lands first, ours is refused
    // with err_code 10065. Made deterministic: the first add creates the stream, then reports the overlap.
    const names = batonStreamNames(prefix);
    const add = a.jsm.streams.add.bind(a.jsm.streams);
    let adds = 0;
    const jsm = Object.create(a.jsm) as typeof a.jsm;
    Object.defineProperty(jsm, 'streams', {
      value: Object.assign(Object.create(a.jsm.streams) as typeof a.jsm.streams, {
        add: async (config: Parameters<typeof add>[0]) => {
          adds++;
          await add(config);
          throw Object.assign(new Error('subjects overlap with an existing stream'), {
            api_error: { code: 400, err_code: 10065, description: 'subjects overlap with an existing stream' },
          });
        },
      }),
    });
    const report = await provision(jsm, { streams: topology().streams.filter((spec) => spec.name === names.dlq), consumers: [] });
    expect(report.streams[names.dlq]).toBe('unchanged');
    expect(adds).toBe(1);
  });

  it("a different stream already on the subjects is refused with the server's reason, after a few reads", async () => {
    const names = batonStreamNames(prefix);
    const squatter = `${prefix.toUpperCase()}_SQUAT`;
    await a.jsm.streams.add({ name: squatter, subjects: [`${prefix}.dlq.>`], storage: StorageType.Memory });
    try {
      await expect(provision(a.jsm, { streams: topology().streams.filter((spec) => spec.name === names.dlq), consumers: [] })).rejects.toThrow(
        new RegExp(`cannot create stream ${names.dlq}: subjects overlap`),
      );
    } finally {
      await a.jsm.streams.delete(squatter);
    }
  });

  it('many instances starting at once with file storage all succeed', async () => {
    // The server answers a create of an identical existing stream with success, so several may
    // report `created`; what matters is that none fails and each stream exists once, as specified.
    const fileTopology = (): TopologySpec => ({ ...topology(), streams: batonTopology(prefix, { storage: 'file' }).streams });
    const reports = await Promise.all([a, b, a, b, a, b].map((handle) => provision(handle.jsm, fileTopology())));
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) {
      expect(reports.every((report) => ['created', 'unchanged'].includes(report.streams[name] as string))).toBe(true);
      expect((await a.jsm.streams.info(name)).config.storage).toBe(StorageType.File);
    }
    expect((await a.jsm.streams.list().next()).filter((info) => info.config.name.startsWith(prefix.toUpperCase()))).toHaveLength(3);
  });

  it('streams and consumers are provisioned idempotently: two instances starting at once both succeed', async () => {
    const [first, second] = await Promise.all([provision(a.jsm, topology()), provision(b.jsm, topology())]);
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) {
      expect(['created', 'unchanged']).toContain(first.streams[name]);
      expect(['created', 'unchanged']).toContain(second.streams[name]);
    }
    const again = await provision(a.jsm, topology());
    expect(Object.values(again.streams)).toEqual(['unchanged', 'unchanged', 'unchanged']);
    expect(Object.values(again.consumers)).toEqual(['unchanged', 'unchanged']);

    const events = await a.jsm.streams.info(names.events);
    expect(events.config.subjects).toEqual([`${prefix}.ev.>`]);
    expect(events.config.duplicate_window).toBe(2 * 60 * 1_000_000_000);
    expect(events.config.deny_delete).toBe(true);
  });

  it('retired durables are deleted where they exist and reported absent where they do not (or their stream does not); two instances retiring at once both succeed', async () => {
    await provision(a.jsm, topology());
    const names = batonStreamNames(prefix);
    const retired = [
      { stream: names.events, durable: 'notifier-all' },
      { stream: names.inbox, durable: 'never-created' },
      { stream: `${names.events}_GONE`, durable: 'notifier-all' },
    ];
    const [first, second] = await Promise.all([retireConsumers(a.jsm, retired), retireConsumers(b.jsm, retired)]);
    const deleted = `${names.events}/notifier-all`;
    // At least one deleted it; the other found it gone, or (the two requests overlapping at the
    // server) was answered as deleting it too. Neither fails.
    expect([first[deleted], second[deleted]]).toContain('deleted');
    for (const action of [first[deleted], second[deleted]]) expect(['deleted', 'absent']).toContain(action);
    for (const report of [first, second]) {
      expect(report[`${names.inbox}/never-created`]).toBe('absent');
      expect(report[`${names.events}_GONE/notifier-all`]).toBe('absent');
    }
    await expect(a.jsm.consumers.info(names.events, 'notifier-all')).rejects.toThrow(/consumer not found/);
    // The durable it was not asked to retire is untouched.
    expect((await a.jsm.consumers.info(names.inbox, 'router-results')).config.durable_name).toBe('router-results');
  });

  it('the inbox stores only subjects a consumer reads: a publish on <prefix>.in.<p>.bogus is refused (no stream), and an inbox provisioned as <prefix>.in.> is narrowed in place', async () => {
    const names = batonStreamNames(prefix);
    // An inbox as older versions provisioned it.
    await a.jsm.streams.add({ name: names.inbox, subjects: [`${prefix}.in.>`], storage: StorageType.Memory });
    const report = await provision(a.jsm, topology());
    expect(report.streams[names.inbox]).toBe('updated');
    expect((await a.jsm.streams.info(names.inbox)).config.subjects).toEqual(inboxSubjects(prefix));
    await expect(a.js.publish(`${prefix}.in.demo.bogus`, new TextEncoder().encode('{}'), { timeout: 2000 })).rejects.toThrow();
    expect((await a.js.publish(`${prefix}.in.demo.result.coder`, new TextEncoder().encode('{}'))).stream).toBe(names.inbox);
    expect((await a.jsm.streams.info(names.inbox)).state.messages).toBe(1);
  });

  it('a changed editable field is updated in place', async () => {
    await provision(a.jsm, topology());
    const report = await provision(a.jsm, topology({ ackWaitMs: 10_000, maxAgeMs: 60 * 60_000 }));
    expect(report.streams[batonStreamNames(prefix).inbox]).toBe('updated');
    expect(report.consumers[`${batonStreamNames(prefix).inbox}/router-results`]).toBe('updated');
    const info = await a.jsm.consumers.info(batonStreamNames(prefix).inbox, 'router-results');
    expect(info.config.ack_wait).toBe(10_000 * 1_000_000);
  });

  it('refuses to change an immutable field and says which', async () => {
    await provision(a.jsm, topology());
    const changed = batonTopology(prefix, { storage: 'file' });
    await expect(provision(a.jsm, changed)).rejects.toThrow(ProvisionError);
    await expect(provision(a.jsm, changed)).rejects.toThrow(/storage/);
  });
});
