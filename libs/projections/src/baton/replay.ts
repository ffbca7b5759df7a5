import type { EventRegistry, Rejection } from '@baton/contracts';
import { batonStreamNames, decodeEvent, streamReader, type NatsHandle } from '@baton/eventstore';
import type { ProjectionStore, ReplaySource, RestampOutcome, SequencedEvent } from '../store';
import { batonProjections, type EventsStreamMark } from './projector';

export interface JetStreamReplayOptions {
  nats: Pick<NatsHandle, 'js' | 'jsm'>;
  /** Subject prefix (`baton`); the stream is `<PREFIX>_EVENTS` unless `stream` is given. */
  prefix: string;
  registry: EventRegistry;
  stream?: string;
  /** Messages per pull (default 500). */
  batch?: number;
  /**
   * Called for a stored message that does not decode (not JSON, unknown type, bad payload). The
   * replay skips it, as the live consumer dead-letters it: both leave the projections unchanged.
   */
  onUndecodable?: (seq: number, subject: string, rejection: Rejection) => void;
}

/**
 * A {@link ReplaySource} over Baton's events stream: each call reads from `fromSeq` up to the
 * stream's last sequence as of the call (one ephemeral pull consumer that the read deletes),
 * decoding and upcasting every message through the registry, then completes. Empty when the
 * stream holds nothing at or after `fromSeq`.
 */
export function jetStreamReplaySource(options: JetStreamReplayOptions): ReplaySource {
  const reader = streamReader(options.nats, options.stream ?? batonStreamNames(options.prefix).events);
  const batch = options.batch ?? 500;
  return (fromSeq: number) =>
    (async function* (): AsyncGenerator<SequencedEvent> {
      const bounds = await reader.bounds();
      const first = Math.max(1, fromSeq, bounds.firstSeq);
      if (bounds.messages === 0 || first > bounds.lastSeq) return;
      for await (const msg of reader.range({ fromSeq: first, toSeq: bounds.lastSeq, batch })) {
        const decoded = decodeEvent(options.registry, msg.data, (name) => msg.header(name));
        if (!decoded.ok) options.onUndecodable?.(msg.seq, msg.subject, decoded.rejection);
        else {
          // The decoded envelope is this read's own (parsed from the message's bytes): it becomes
          // the sequenced event in place instead of being copied into a new object per event.
          const event = decoded.envelope as SequencedEvent;
          event.seq = msg.seq;
          const traceId = traceIdOf(msg.header('traceparent'));
          if (traceId) event.traceId = traceId;
          yield event;
        }
      }
    })();
}

/**
 * The events stream's mark (`BatonProjector.builtFromAnotherStream`): its identity is the creation
 * time the server keeps for the stream, which a stream recreated under the same name does not share
 * (it survives server restarts and stream config updates); and its last sequence. Throws when the
 * stream cannot be read.
 */
export async function eventsStreamMark(nats: Pick<NatsHandle, 'jsm'>, stream: string): Promise<EventsStreamMark> {
  const info = await nats.jsm.streams.info(stream);
  return { identity: info.created, lastSeq: info.state.last_seq };
}

/**
 * The same events stream reads with a new identity (`to`, a restore gave it a new creation time):
 * each of Baton's projections whose active generation recorded `from` and applied no more than
 * `throughSeq` records `to` instead (`ProjectionStore.restampStream`), so the notifier does not
 * rebuild it as if built from another stream. What each one did, by projection name.
 */
export async function restampEventsStream(
  store: Pick<ProjectionStore, 'restampStream'>,
  change: { from: string; to: string; throughSeq: number },
): Promise<Record<string, RestampOutcome>> {
  const outcomes: Record<string, RestampOutcome> = {};
  for (const projection of batonProjections()) outcomes[projection.name] = await store.restampStream(projection.name, change);
  return outcomes;
}

/** The notifier's durable consumer on the events stream: it feeds the live projections and the notices. */
export const PROJECTION_DURABLE = 'notifier_projections';

/**
 * How far the notifiers of a prefix have published notices: the projection consumer's ack floor
 * (every event up to it was applied to every projection, `notices` included, and its notice
 * published). Null when the consumer does not exist — no notifier ever ran on this stream, or it
 * was deleted — or cannot be read. A `notices` projection Redis lost is rebuilt to it (by the
 * notifier, and by `baton replay`), so the events after it get their notices from the live applier.
 */
export async function noticesPublishedThrough(nats: Pick<NatsHandle, 'jsm'>, prefix: string): Promise<number | null> {
  return nats.jsm.consumers.info(batonStreamNames(prefix).events, PROJECTION_DURABLE).then(
    (info) => info.ack_floor.stream_seq,
    () => null,
  );
}

/** The trace id of a W3C `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`), or null. */
export function traceIdOf(traceparent: string | undefined): string | null {
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}/.exec(traceparent?.trim() ?? '');
  return match && !/^0+$/.test(match[1] as string) ? (match[1] as string) : null;
}
