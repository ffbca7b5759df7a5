import { MsgIds, Subjects } from '@baton/contracts';
import { DiscardPolicy, StorageType } from 'nats';
import type { NatsHandle } from './connection';
import { EventStoreErrorCode, isUnavailable, mapPublishError, StorageFull, StreamNotFound } from './errors';
import { connectTest, deleteTopology, randomPrefix } from './int/support';
import { publishUnderOwnId } from './own-id-publish';
import { provision, type KeptLimit } from './provision';
import { batonStreamNames, batonTopology } from './topology';

/*
 * A bounded inbox (BATON_INBOX_MAX_BYTES; docs/sre.md, Capacity): full, it refuses what comes with
 * a typed error — `storage_full`, not the "no responders" nats.js makes of the stream's 503 — and
 * never drops a message it acknowledged. Provision brings an inbox made before (discard old, no
 * limit) to that, and never lowers a limit below what the inbox holds (JetStream would drop its
 * oldest messages to fit, read or not).
 */

const encoder = new TextEncoder();
const KiB = 1024;

describe('the inbox stream with a byte limit (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('inbox-capacity');
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  /** Publish 4 KiB results under their own ids until one is refused; the acknowledged sequences and the refusal. */
  const fill = async (max: number) => {
    const acked: number[] = [];
    for (let i = 0; i < max; i++) {
      const subject = Subjects.agentResult(prefix, 'acme', 'bob');
      try {
        const ack = await publishUnderOwnId(
          nats,
          subject,
          encoder.encode(JSON.stringify({ n: i, pad: 'x'.repeat(4 * KiB) })),
          MsgIds.result('acme', 'wr-1', `r-${i}`),
        );
        acked.push(ack.seq);
      } catch (error) {
        return { acked, error };
      }
    }
    return { acked, error: null };
  };

  it('full, it refuses a publish with StorageFull (storage_full, stream_bytes) and keeps every message it acknowledged', async () => {
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: 64 * KiB }));
    const inbox = batonStreamNames(prefix).inbox;
    expect((await nats.jsm.streams.info(inbox)).config).toMatchObject({ max_bytes: 64 * KiB, discard: DiscardPolicy.New });

    const { acked, error } = await fill(100);
    expect(error).toBeInstanceOf(StorageFull);
    expect(error).toMatchObject({ code: EventStoreErrorCode.storageFull, limit: 'stream_bytes', subject: Subjects.agentResult(prefix, 'acme', 'bob') });
    expect(error).not.toBeInstanceOf(StreamNotFound);
    // The infrastructure's condition, not the message's: the services retry such a failure.
    expect(isUnavailable(error)).toBe(true);
    expect(acked.length).toBeGreaterThan(5);
    // Nothing acknowledged was dropped to make room: the first is still there, and all of them.
    const state = (await nats.jsm.streams.info(inbox)).state;
    expect({ first: state.first_seq, messages: state.messages }).toEqual({ first: acked[0], messages: acked.length });
    expect(state.bytes).toBeLessThanOrEqual(64 * KiB);
    // Refused again as long as it is full; a raw publish shows what the server answers.
    const raw = await nats.js
      .publish(Subjects.agentResult(prefix, 'acme', 'bob'), encoder.encode(JSON.stringify({ pad: 'x'.repeat(4 * KiB) })))
      .catch((e: unknown) => e);
    expect(raw).toMatchObject({ api_error: { err_code: 10077, description: 'maximum bytes exceeded' } });
    expect(mapPublishError(raw, 'x', undefined)).toBeInstanceOf(StorageFull);
  });

  it('provision brings an inbox made before (discard old, no limit) to discard new with its limit; a limit below what it holds is kept back, nothing dropped', async () => {
    const inbox = batonStreamNames(prefix).inbox;
    // The inbox as an earlier Baton made it: drop the oldest at a limit, no limit set.
    const before = batonTopology(prefix, { storage: 'memory' }).streams.map((s) => (s.name === inbox ? { ...s, discard: 'old' as const } : s));
    await provision(nats.jsm, { streams: before });
    expect((await nats.jsm.streams.info(inbox)).config).toMatchObject({ max_bytes: -1, discard: DiscardPolicy.Old });
    const { acked } = await fill(40);
    expect(acked).toHaveLength(40);
    const held = (await nats.jsm.streams.info(inbox)).state.bytes;
    expect(held).toBeGreaterThan(160 * KiB);

    // A limit below what it holds: applying it would drop the oldest; the rest of the spec is applied.
    const kept: KeptLimit[] = [];
    const report = await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: 64 * KiB }), { onLimitKept: (k) => kept.push(k) });
    expect(report.streams[inbox]).toBe('updated');
    expect(kept).toEqual([expect.objectContaining({ stream: inbox, heldBytes: held, wantedMaxBytes: 64 * KiB, keptMaxBytes: -1 })]);
    const after = await nats.jsm.streams.info(inbox);
    expect(after.config).toMatchObject({ max_bytes: -1, discard: DiscardPolicy.New, storage: StorageType.Memory });
    expect({ first: after.state.first_seq, messages: after.state.messages }).toEqual({ first: acked[0], messages: 40 });

    // One it holds with room to spare is applied.
    const roomy = 4 * held;
    kept.length = 0;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: roomy }), { onLimitKept: (k) => kept.push(k) });
    expect(kept).toEqual([]);
    expect((await nats.jsm.streams.info(inbox)).config).toMatchObject({ max_bytes: roomy, discard: DiscardPolicy.New });
    // Lowering it again below what it holds is kept back at the limit in force.
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: 64 * KiB }), { onLimitKept: (k) => kept.push(k) });
    expect(kept).toEqual([expect.objectContaining({ keptMaxBytes: roomy })]);
    expect((await nats.jsm.streams.info(inbox)).state.messages).toBe(40);
  });
});
