import { DiscardPolicy, StorageType } from 'nats';
import type { NatsHandle } from './connection';
import { connectTest, deleteTopology, randomPrefix } from './int/support';
import { LIMIT_HEADROOM_CAP, limitFits, limitHeadroom, provision, smallestLimitFor, type KeptLimit } from './provision';
import { batonStreamNames, batonTopology } from './topology';

/*
 * The rule for a byte limit on a `discard: new` stream (BATON_INBOX_MAX_BYTES; docs/sre.md,
 * "Capacity"): JetStream lowers a stream's limit by dropping its oldest messages at once, whatever
 * the discard policy (the first test shows it on the real server), so provision applies a limit only
 * with a quarter of it (at most 64 MiB) free above what the stream holds — room for what publishers
 * store while the update is applied — and, when it does not, says the numbers: what the stream
 * holds, the smallest limit it would take now, what it must hold for the asked one.
 */

const KiB = 1024;
const MiB = 1024 * KiB;

describe('a byte limit on a discard-new stream: the headroom rule, with its numbers (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('provision-limit');
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const fill = async (subject: string, count: number) => {
    for (let i = 0; i < count; i++) await nats.js.publish(subject, new Uint8Array(4 * KiB), { msgID: `m-${i}` });
  };

  it('the premise: the server applies a limit below what a discard-new stream holds by dropping its oldest messages', async () => {
    const name = `${batonStreamNames(prefix).inbox}_PREMISE`;
    await nats.jsm.streams.add({ name, subjects: [`${prefix}.premise.>`], storage: StorageType.Memory, discard: DiscardPolicy.New });
    try {
      await fill(`${prefix}.premise.x`, 40);
      const before = await nats.jsm.streams.info(name);
      expect(before.state.messages).toBe(40);
      await nats.jsm.streams.update(name, { ...before.config, max_bytes: 64 * KiB });
      const after = await nats.jsm.streams.info(name);
      expect(after.state.messages).toBeLessThan(40);
      expect(after.state.first_seq).toBeGreaterThan(1);
    } finally {
      await nats.jsm.streams.delete(name).catch(() => undefined);
    }
  });

  it('the smallest limit a stream takes is exact: held + a quarter of the limit (at most 64 MiB) fits in it', () => {
    for (const held of [1, 3, 100, 4 * KiB, 165_280, 93_629_377, 192 * MiB - 1, 192 * MiB, 5 * 1024 * MiB]) {
      const needed = smallestLimitFor(held);
      expect(limitFits(needed, held)).toBe(true);
      expect(limitFits(needed - 1, held)).toBe(false);
      expect(needed - held).toBe(limitHeadroom(needed));
    }
    // The audit's numbers: 93 629 377 bytes held needs 124 839 169, not 93 900 000.
    expect(smallestLimitFor(93_629_377)).toBe(124_839_169);
    expect(smallestLimitFor(5 * 1024 * MiB)).toBe(5 * 1024 * MiB + LIMIT_HEADROOM_CAP);
  });

  it('a limit one byte short of the smallest is kept back with the numbers that say why; the smallest is applied; nothing is dropped', async () => {
    const inbox = batonStreamNames(prefix).inbox;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    await fill(`${prefix}.in.acme.result.bob`, 30);
    const held = (await nats.jsm.streams.info(inbox)).state.bytes;
    const needed = smallestLimitFor(held);
    expect(needed).toBeGreaterThan(held);

    const kept: KeptLimit[] = [];
    const short = needed - 1;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: short }), { onLimitKept: (k) => kept.push(k) });
    expect(kept).toEqual([
      expect.objectContaining({
        stream: inbox,
        heldBytes: held,
        wantedMaxBytes: short,
        keptMaxBytes: -1,
        headroomBytes: limitHeadroom(short),
        neededMaxBytes: needed,
        appliesAtHeldBytes: short - limitHeadroom(short),
      }),
    ]);
    // The warning says the rule and the numbers: what it holds, what it needs, what stays.
    expect(kept[0]!.detail).toContain(`max_bytes ${short} not applied: the stream holds ${held} bytes`);
    expect(kept[0]!.detail).toContain('a quarter of itself (at most 64 MiB');
    expect(kept[0]!.detail).toContain(`needs max_bytes >= ${needed}, or the stream to hold <= ${short - limitHeadroom(short)} bytes`);
    expect(kept[0]!.detail).toContain('no limit stays in force');
    expect((await nats.jsm.streams.info(inbox)).config.max_bytes).toBe(-1);

    kept.length = 0;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory', inboxMaxBytes: needed }), { onLimitKept: (k) => kept.push(k) });
    expect(kept).toEqual([]);
    const after = await nats.jsm.streams.info(inbox);
    expect(after.config).toMatchObject({ max_bytes: needed, discard: DiscardPolicy.New });
    expect({ first: after.state.first_seq, messages: after.state.messages, bytes: after.state.bytes }).toEqual({ first: 1, messages: 30, bytes: held });
  });
});
