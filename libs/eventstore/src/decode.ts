import { decodeUtf8, type EventEnvelope, type EventRegistry, type Rejection } from '@baton/contracts';

/** A stored event's bytes, decoded: the envelope (upcast to the current version), or why not. */
export type DecodedEvent = { ok: true; envelope: EventEnvelope } | { ok: false; rejection: Rejection; cause?: unknown };

/**
 * Decode a stored event's bytes: strict UTF-8, JSON, then the registry (envelope schema, known
 * type, supported version, upcast, payload schema). Never throws: bytes that are not UTF-8 are
 * rejected with `invalid_utf8` (never decoded with replacement characters), bytes that are not
 * JSON with `malformed_json` (the parse error as `cause`), anything else with the registry's
 * rejection. The one decoder of stored events (store reads, replays, reactors, gap reads).
 */
export function decodeEvent(registry: EventRegistry, data: Uint8Array): DecodedEvent {
  const text = decodeUtf8(data);
  if (!text.ok) return { ok: false, rejection: { ...text.rejection, message: `stored event: ${text.rejection.message}` } };
  let raw: unknown;
  try {
    raw = JSON.parse(text.value);
  } catch (error) {
    return { ok: false, rejection: { code: 'malformed_json', message: `stored event is not JSON: ${(error as Error).message}`, issues: [] }, cause: error };
  }
  const decoded = registry.decode(raw);
  return decoded.ok ? { ok: true, envelope: decoded.value } : { ok: false, rejection: decoded.rejection };
}
