import type { MsgHdrs } from 'nats';
import { mapPublishError } from './errors';
import { streamReader, type StoredMessage, type StreamClients } from './stream-reader';

/** What {@link publishUnderOwnId} did. */
export interface OwnIdAck {
  stream: string;
  seq: number;
  /** The stream already held this message (a retry of this publisher's own): nothing new was stored. */
  duplicate: boolean;
  /** The `Nats-Msg-Id` the stored message carries: `msgId`, or another one when `msgId` was taken (see {@link publishUnderOwnId}); null when it was stored without one. */
  msgId: string | null;
  /** The messages found holding `msgId` (or a later id tried) that were not this publisher's, oldest first. */
  foreign: Array<{ seq: number; subject: string }>;
  /** On a duplicate: the message the stream holds under the id, as read to check it (null when it was gone). */
  stored?: StoredMessage | null;
}

/** Further ids tried after the first was found taken by another publisher, before storing without one. */
const MAX_REKEYS = 3;

/**
 * Publish a service's message under `msgId`, so that a retry is stored once — and make sure that
 * when the stream answers "duplicate", the message it holds under that id is really this one.
 *
 * A stream's duplicate window covers every subject it stores, and nats-server 2.9 lets whoever may
 * publish on one of them set any `Nats-Msg-Id`. The inbox stream takes agents' results next to
 * the services' offers and stop requests, so an agent could publish first under the id of another
 * project's offer or stop (`offer:<project>:…`, `stop:<project>:…`) and have the real one dropped
 * as its duplicate. On a duplicate this reads the stored message (`STREAM.MSG.GET` by the ack's
 * sequence); when `isOwn` says it is not this message (by default: it was published on another
 * subject), the message is published again under `<msgId>:<n>:<seq of the taker>` — each
 * deterministic for a retry within the window — and, after {@link MAX_REKEYS} such ids were taken
 * too, without an id: stored for sure, at worst twice (the services' consumers of these subjects
 * are idempotent). A stored message gone by the time it is read (stream limits) is taken as this
 * publisher's. Errors are mapped with `mapPublishError`.
 */
export async function publishUnderOwnId(
  nats: StreamClients,
  subject: string,
  data: Uint8Array,
  msgId: string,
  options: { headers?: MsgHdrs; isOwn?: (stored: StoredMessage) => boolean } = {},
): Promise<OwnIdAck> {
  const isOwn = options.isOwn ?? ((stored: StoredMessage) => stored.subject === subject);
  const foreign: OwnIdAck['foreign'] = [];
  let id: string | null = msgId;
  for (let attempt = 0; ; attempt++) {
    let ack: { stream: string; seq: number; duplicate: boolean };
    try {
      ack = await nats.js.publish(subject, data, { ...(id !== null ? { msgID: id } : {}), ...(options.headers ? { headers: options.headers } : {}) });
    } catch (err) {
      throw mapPublishError(err, subject, undefined);
    }
    if (!ack.duplicate || id === null) return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate, msgId: id, foreign };
    const stored = await streamReader(nats, ack.stream).message(ack.seq);
    if (stored === null || isOwn(stored)) return { stream: ack.stream, seq: ack.seq, duplicate: true, msgId: id, foreign, stored };
    foreign.push({ seq: ack.seq, subject: stored.subject });
    id = attempt < MAX_REKEYS ? `${msgId}:${attempt + 1}:${ack.seq}` : null;
  }
}
