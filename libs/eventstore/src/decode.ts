import type { EventEnvelope, EventRegistry, Rejection } from '@baton/contracts';

/** A stored event's bytes, decoded: the envelope (upcast to the current version), or why not. */
export type DecodedEvent = { ok: true; envelope: EventEnvelope } | { ok: false; rejection: Rejection; cause?: unknown };

const decoder = new TextDecoder();

/**
 * Decode a stored event's bytes: JSON, then the registry (envelope schema, known type, supported
 * version, upcast, payload schema). Never throws: bytes that are not JSON are rejected with
 * `malformed_json` (the parse error as `cause`), anything else with the registry's rejection.
 * The one decoder of stored events (store reads, replays, reactors, gap reads).
 */
export function decodeEvent(registry: EventRegistry, data: Uint8Array): DecodedEvent {
  let raw: unknown;
  try {
    raw = JSON.parse(decoder.decode(data));
  } catch (error) {
    return { ok: false, rejection: { code: 'malformed_json', message: `stored event is not JSON: ${(error as Error).message}`, issues: [] }, cause: error };
  }
  const decoded = registry.decode(raw);
  return decoded.ok ? { ok: true, envelope: decoded.value } : { ok: false, rejection: decoded.rejection };
}
