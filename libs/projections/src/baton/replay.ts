import type { EventEnvelope, EventRegistry, Rejection } from '@baton/contracts';
import { batonStreamNames, readStreamRange, type NatsHandle } from '@baton/eventstore';
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
 * stream's last sequence as of the call (one ephemeral pull consumer that the read deletes),
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
      const first = Math.max(1, fromSeq, info.state.first_seq);
      if (info.state.messages === 0 || first > endSeq) return;
      for await (const msg of readStreamRange({ js: options.nats.js, jsm: options.nats.jsm, stream, fromSeq: first, toSeq: endSeq, batch })) {
        const event = decode(options.registry, msg.data);
        if ('rejection' in event) options.onUndecodable?.(msg.seq, msg.subject, event.rejection);
        else {
          const traceId = traceIdOf(msg.headers?.get('traceparent'));
          yield { ...event.value, seq: msg.seq, ...(traceId ? { traceId } : {}) };
        }
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
