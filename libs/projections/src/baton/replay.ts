import type { EventEnvelope, EventRegistry, Rejection } from '@baton/contracts';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { DeliverPolicy } from 'nats';
import type { ReplaySource, SequencedEvent } from '../store';

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

const decoder = new TextDecoder();

/**
 * A {@link ReplaySource} over Baton's events stream: each call reads from `fromSeq` up to the
 * stream's last sequence as of the call (one ordered, ephemeral consumer; nothing to clean up),
 * decoding and upcasting every message through the registry, then completes. Empty when the
 * stream holds nothing at or after `fromSeq`.
 */
export function jetStreamReplaySource(options: JetStreamReplayOptions): ReplaySource {
  const stream = options.stream ?? batonStreamNames(options.prefix).events;
  const batch = options.batch ?? 500;
  return (fromSeq: number) =>
    (async function* (): AsyncGenerator<SequencedEvent> {
      const info = await options.nats.jsm.streams.info(stream);
      const endSeq = info.state.last_seq;
      const start = Math.max(1, fromSeq, info.state.first_seq);
      if (info.state.messages === 0 || start > endSeq) return;
      const consumer = await options.nats.js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start });
      let last = start - 1;
      while (last < endSeq) {
        const messages = await consumer.fetch({ max_messages: Math.min(batch, endSeq - last), expires: 2000 });
        let got = 0;
        for await (const msg of messages) {
          got++;
          last = msg.seq;
          const event = decode(options.registry, msg.data);
          if ('rejection' in event) options.onUndecodable?.(msg.seq, msg.subject, event.rejection);
          else {
            const traceId = traceIdOf(msg.headers?.get('traceparent'));
            yield { ...event.value, seq: msg.seq, ...(traceId ? { traceId } : {}) };
          }
          if (last >= endSeq) break;
        }
        // A pull that brings nothing within its expiry: the messages left up to endSeq were deleted.
        if (got === 0) break;
      }
    })();
}

/** The trace id of a W3C `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`), or null. */
export function traceIdOf(traceparent: string | undefined): string | null {
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}/.exec(traceparent?.trim() ?? '');
  return match && !/^0+$/.test(match[1] as string) ? (match[1] as string) : null;
}

function decode(registry: EventRegistry, data: Uint8Array): { value: EventEnvelope } | { rejection: Rejection } {
  let raw: unknown;
  try {
    raw = JSON.parse(decoder.decode(data));
  } catch (error) {
    return { rejection: { code: 'malformed_json', message: `stored event is not JSON: ${(error as Error).message}`, issues: [] } };
  }
  const decoded = registry.decode(raw);
  return decoded.ok ? { value: decoded.value } : { rejection: decoded.rejection };
}
