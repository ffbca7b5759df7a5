import type { NatsHandle } from './connection';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';
import { publishUnderOwnId } from './own-id-publish';
import { batonStreamNames } from './topology';

/*
 * The inbox stream's duplicate window covers every subject it stores, and an agent may set any
 * Nats-Msg-Id on its own result subject: it can take the id of another project's offer or stop
 * first. publishUnderOwnId notices that the message held under the id is not its own and stores
 * its message anyway (real NATS, a stream of the test's own).
 */
describe('publishUnderOwnId (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  const encode = (text: string) => new TextEncoder().encode(text);
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('own-id-int');
    await provisionTopology(nats, prefix);
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const stored = async (seq: number) => {
    const message = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq });
    return { subject: message.subject, data: decode(message.data), msgId: message.header?.get('Nats-Msg-Id') || null };
  };

  it('an id another publisher took on another subject does not drop the message: it is stored under a derived id, and a retry of it is a duplicate', async () => {
    const offer = `${prefix}.in.beta.offer.bob`;
    const id = 'offer:beta:h-1:7';
    // An agent of project alpha publishes first, on its own result subject, under beta's offer id.
    const squat = await nats.js.publish(`${prefix}.in.alpha.result.mallory`, encode('{}'), { msgID: id });
    const first = await publishUnderOwnId(nats, offer, encode('{"offer":1}'), id);
    expect(first).toMatchObject({
      duplicate: false,
      msgId: `${id}:1:${squat.seq}`,
      foreign: [{ seq: squat.seq, subject: `${prefix}.in.alpha.result.mallory` }],
    });
    expect(await stored(first.seq)).toEqual({ subject: offer, data: '{"offer":1}', msgId: `${id}:1:${squat.seq}` });
    // A retry within the window (a crash before the caller recorded it) stores nothing new.
    const retry = await publishUnderOwnId(nats, offer, encode('{"offer":1}'), id);
    expect(retry).toMatchObject({ duplicate: true, seq: first.seq, msgId: `${id}:1:${squat.seq}` });
  });

  it('its own earlier message under the id is a plain duplicate; when every id it tries is taken, it stores the message without one', async () => {
    const stop = `${prefix}.in.beta.stop`;
    const own = await publishUnderOwnId(nats, stop, encode('{"stop":1}'), 'stop:beta:p-1');
    expect(own).toMatchObject({ duplicate: false, msgId: 'stop:beta:p-1', foreign: [] });
    expect(await publishUnderOwnId(nats, stop, encode('{"stop":1}'), 'stop:beta:p-1')).toMatchObject({ duplicate: true, seq: own.seq, foreign: [] });

    // A publisher that takes the id and each id derived from it as it appears.
    const squatter = `${prefix}.in.alpha.result.mallory`;
    const taken = await nats.js.publish(squatter, encode('{}'), { msgID: 'stop:beta:p-2' });
    let next = taken.seq;
    for (let n = 1; n <= 3; n++) next = (await nats.js.publish(squatter, encode('{}'), { msgID: `stop:beta:p-2:${n}:${next}` })).seq;
    const forced = await publishUnderOwnId(nats, stop, encode('{"stop":2}'), 'stop:beta:p-2');
    expect(forced).toMatchObject({ duplicate: false, msgId: null });
    expect(forced.foreign).toHaveLength(4);
    expect(await stored(forced.seq)).toEqual({ subject: stop, data: '{"stop":2}', msgId: null });
  });
});
