import { decodeUtf8, EventHeader, type EventEnvelope, type EventRegistry, type Rejection } from '@baton/contracts';
import { SCHEMA_HEADER, schemaFingerprint } from './schema-fingerprint';

/** A stored event's bytes, decoded: the envelope (upcast to the current version), or why not. */
export type DecodedEvent = { ok: true; envelope: EventEnvelope } | { ok: false; rejection: Rejection; cause?: unknown };

/** The first value of a stored message's header, when the caller has its headers. */
export type HeaderOf = (name: string) => string | undefined;

/** A header accessor over a `{ name: [values] }` record (a consumed message's headers). */
export function headerOf(headers: Record<string, string[]>): HeaderOf {
  return (name) => headers[name]?.[0];
}

/**
 * Decode a stored event's bytes: strict UTF-8, JSON, then the registry (envelope schema, known
 * type, supported version, upcast, payload schema). Never throws: bytes that are not UTF-8 are
 * rejected with `invalid_utf8` (never decoded with replacement characters), bytes that are not
 * JSON with `malformed_json` (the parse error as `cause`), anything else with the registry's
 * rejection. The one decoder of stored events (store reads, replays, reactors, gap reads).
 *
 * Given the message's headers, an event the store stamped with this build's schema fingerprint
 * for its type (`Baton-Schema`, schema-fingerprint.ts) is not validated a second time: it is taken
 * as parsed once it is an object of the stamped type at the current version.
 */
export function decodeEvent(registry: EventRegistry, data: Uint8Array, header?: HeaderOf): DecodedEvent {
  const text = decodeUtf8(data);
  if (!text.ok) return { ok: false, rejection: { ...text.rejection, message: `stored event: ${text.rejection.message}` } };
  let raw: unknown;
  try {
    raw = JSON.parse(text.value);
  } catch (error) {
    return { ok: false, rejection: { code: 'malformed_json', message: `stored event is not JSON: ${(error as Error).message}`, issues: [] }, cause: error };
  }
  return decodeParsedEvent(registry, raw, header);
}

/** {@link decodeEvent} of a body already parsed from JSON (the Nest transport parses bodies). */
export function decodeParsedEvent(registry: EventRegistry, raw: unknown, header?: HeaderOf): DecodedEvent {
  if (header && isStampedWithThisBuild(registry, raw, header)) return { ok: true, envelope: raw as EventEnvelope };
  const decoded = registry.decode(raw);
  return decoded.ok ? { ok: true, envelope: decoded.value } : { ok: false, rejection: decoded.rejection };
}

function isStampedWithThisBuild(registry: EventRegistry, raw: unknown, header: HeaderOf): boolean {
  const print = header(SCHEMA_HEADER);
  if (print === undefined) return false;
  const type = header(EventHeader.type);
  if (type === undefined || print !== schemaFingerprint(registry, type)) return false;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return false;
  const env = raw as { type?: unknown; version?: unknown; payload?: unknown };
  return env.type === type && env.version === registry.spec(type)?.version && typeof env.payload === 'object' && env.payload !== null;
}
