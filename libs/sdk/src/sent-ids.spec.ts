import type { NatsJetStream } from '@baton/eventstore';
import { Limits } from '@baton/contracts';
import { DuplicateMessageError, InvalidInputError } from './errors';
import { publishOnce, SentMessageIds } from './sent-ids';

type PubAck = Awaited<ReturnType<NatsJetStream['publish']>>;

/** A JetStream stand-in that stores each msg id once (a duplicate window that never ends). */
function fakeStream() {
  const stored = new Map<string, number>();
  let seq = 0;
  const js = {
    publish: async (_subject: string, _data?: Uint8Array, opts?: { msgID?: string }): Promise<PubAck> => {
      const id = opts?.msgID ?? `anon-${seq}`;
      const known = stored.get(id);
      if (known !== undefined) return { stream: 'S', seq: known, duplicate: true, domain: '' };
      stored.set(id, ++seq);
      return { stream: 'S', seq, duplicate: false, domain: '' };
    },
  } as unknown as Pick<NatsJetStream, 'publish'>;
  return { js, stored };
}

const bytes = new Uint8Array([1]);

describe('the SDK duplicate rule (issue 11): a duplicate the SDK did not expect is an error', () => {
  it('a message over the size cap is refused before sending (InvalidInputError payload_too_large), nothing stored', async () => {
    const { js, stored } = fakeStream();
    const sent = new SentMessageIds();
    const tooLarge = new Uint8Array(Limits.maxMessageBytes + 1);
    const refused = publishOnce(js, sent, 's', tooLarge, 'result:alpha:r-big');
    await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
    await expect(refused).rejects.toMatchObject({ code: 'payload_too_large' });
    expect(stored.size).toBe(0);
    await expect(publishOnce(js, sent, 's', new Uint8Array(Limits.maxMessageBytes), 'result:alpha:r-max')).resolves.toMatchObject({ duplicate: false });
  });

  it('a retry of its own publish answers duplicate: true with the original sequence', async () => {
    const { js } = fakeStream();
    const sent = new SentMessageIds();
    const first = await publishOnce(js, sent, 's', bytes, 'result:alpha:r-1');
    const retry = await publishOnce(js, sent, 's', bytes, 'result:alpha:r-1');
    expect(first).toEqual({ stream: 'S', seq: 1, duplicate: false });
    expect(retry).toEqual({ stream: 'S', seq: 1, duplicate: true });
  });

  it('a duplicate of an id it never sent is a DuplicateMessageError naming the stored message, and stays one on a retry', async () => {
    const { js } = fakeStream();
    await publishOnce(js, new SentMessageIds(), 's', bytes, 'start:alpha:wr-1'); // another publisher
    const mine = new SentMessageIds();
    const error = await publishOnce(js, mine, 's', bytes, 'start:alpha:wr-1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuplicateMessageError);
    expect(error).toMatchObject({ name: 'DuplicateMessageError', msgId: 'start:alpha:wr-1', stream: 'S', seq: 1, subject: 's' });
    await expect(publishOnce(js, mine, 's', bytes, 'start:alpha:wr-1')).rejects.toBeInstanceOf(DuplicateMessageError);
    // The same id in another project is another message.
    await expect(publishOnce(js, mine, 's', bytes, 'start:beta:wr-1')).resolves.toMatchObject({ duplicate: false });
  });

  it('a retry after a publish that failed (a timeout that was in fact stored) is still its own', async () => {
    const { js, stored } = fakeStream();
    const sent = new SentMessageIds();
    const flaky = {
      publish: async (subject: string, data?: Uint8Array, opts?: { msgID?: string }) => {
        await js.publish(subject, data, opts); // stored, but the ack is lost
        throw Object.assign(new Error('TIMEOUT'), { code: 'TIMEOUT' });
      },
    } as unknown as Pick<NatsJetStream, 'publish'>;
    await expect(publishOnce(flaky, sent, 's', bytes, 'result:alpha:r-9')).rejects.toBeDefined();
    expect(stored.has('result:alpha:r-9')).toBe(true);
    await expect(publishOnce(js, sent, 's', bytes, 'result:alpha:r-9')).resolves.toMatchObject({ duplicate: true });
  });

  it('the memory is bounded: past its capacity the oldest ids are forgotten first (least recently used)', () => {
    const sent = new SentMessageIds(3);
    for (const id of ['a', 'b', 'c']) sent.attempt(id);
    sent.attempt('a'); // used again: now the newest
    sent.attempt('d');
    expect(sent.size).toBe(3);
    expect(['a', 'b', 'c', 'd'].filter((id) => sent.has(id))).toEqual(['a', 'c', 'd']);
    expect(() => new SentMessageIds(0)).toThrow(RangeError);
  });
});
