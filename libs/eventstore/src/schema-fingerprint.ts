import { createHash } from 'node:crypto';
import { z } from 'zod';
import { EventEnvelopeSchema, EventHeader, type EventRegistry } from '@baton/contracts';

/**
 * Schema fingerprints: which schema an event was validated against when it was stored.
 *
 * The store validates every event before it appends it and stores what the schema returned
 * (defaults filled, unknown keys dropped). A reader that decodes it again with the same schemas
 * gets the same value back: the second validation only costs CPU (a third of a rebuild's decode,
 * several per cent of each service). So the store stamps each event with a fingerprint of the
 * schemas it passed — the envelope schema and its type's payload schema at its version — in the
 * `Baton-Schema` header, and a reader whose own schemas have the same fingerprint takes the JSON
 * as it is (after checking that it is an object of that type and version). An event without the
 * header, with another fingerprint (a build whose schemas differ, an older version that needs
 * upcasting) or of a type this build does not know is decoded in full, as before.
 *
 * The fingerprint is a SHA-256 of the schemas' JSON Schema form. A type whose schema has a part
 * JSON Schema cannot represent (a date, a bigint, a transform's output) gets no fingerprint: its
 * events are always decoded in full. A constraint JSON Schema does not carry (a `refine`) is not in
 * it: tightening one on an event type must come with a new version of that type
 * (docs/event-sourcing.md), as any change to a stored event's meaning must.
 * Only services may publish on the events subjects (docs/identity.md), so the header is trusted
 * exactly as far as the event itself.
 */
export const SCHEMA_HEADER = EventHeader.schema;

const cache = new WeakMap<EventRegistry, Map<string, string | null>>();

let envelopeJson: string | undefined;

/** The fingerprint of `type` at its current version in `registry`, or undefined for an unknown type. */
export function schemaFingerprint(registry: EventRegistry, type: string): string | undefined {
  let byType = cache.get(registry);
  if (!byType) cache.set(registry, (byType = new Map()));
  const known = byType.get(type);
  if (known !== undefined) return known ?? undefined;
  const spec = registry.spec(type);
  if (!spec) {
    byType.set(type, null);
    return undefined;
  }
  let print: string | null;
  try {
    envelopeJson ??= JSON.stringify(z.toJSONSchema(EventEnvelopeSchema, { io: 'output', unrepresentable: 'throw' }));
    const payloadJson = JSON.stringify(z.toJSONSchema(spec.schema, { io: 'output', unrepresentable: 'throw' }));
    print = createHash('sha256').update(`${type}\n${spec.version}\n${envelopeJson}\n${payloadJson}`).digest('hex').slice(0, 32);
  } catch {
    // A schema JSON Schema cannot represent: no fingerprint, so its events are always decoded in full.
    print = null;
  }
  byType.set(type, print);
  return print ?? undefined;
}

/** The headers the store writes on an event of `type` at `version`. */
export function eventHeaders(registry: EventRegistry, type: string, version: number): Record<string, string> {
  const headers: Record<string, string> = { [EventHeader.type]: type, [EventHeader.version]: String(version) };
  if (version === registry.spec(type)?.version) {
    const print = schemaFingerprint(registry, type);
    if (print) headers[SCHEMA_HEADER] = print;
  }
  return headers;
}
