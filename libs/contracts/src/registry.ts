import { z } from 'zod';
import { RESERVED_NAME_MESSAGE, RESERVED_NAMES } from './common';
import { AggregateKind, EventEnvelope, EventEnvelopeSchema, EventSchemaMap } from './envelope';
import { Decoded, rejectionFromZod } from './rejection';
import { valueAt, withoutUnknownKeys } from './tolerant';

/** Turns a payload of version `from` into the shape of version `from + 1`. Pure. */
export type Upcaster = (payload: unknown) => unknown;

export interface EventTypeSpec {
  type: string;
  aggregate: AggregateKind;
  /** The current version: what writers produce. */
  version: number;
  schema: z.ZodType;
  /** Upcasters keyed by the version they start from. */
  upcasters?: Record<number, Upcaster>;
}

/**
 * The catalogue of event types. Decoding validates the envelope, upcasts an older payload step by
 * step to the current version, then validates the payload against the current schema.
 */
export class EventRegistry {
  private readonly specs = new Map<string, EventTypeSpec>();

  register(spec: EventTypeSpec): this {
    if (this.specs.has(spec.type)) throw new Error(`event type ${spec.type} is registered twice`);
    for (let v = 1; v < spec.version; v++) {
      if (!spec.upcasters?.[v]) throw new Error(`event type ${spec.type} v${spec.version} has no upcaster from v${v}`);
    }
    this.specs.set(spec.type, spec);
    return this;
  }

  registerAll(aggregate: AggregateKind, schemas: EventSchemaMap, version = 1): this {
    for (const [type, schema] of Object.entries(schemas)) this.register({ type, aggregate, version, schema });
    return this;
  }

  has(type: string): boolean {
    return this.specs.has(type);
  }

  spec(type: string): EventTypeSpec | undefined {
    return this.specs.get(type);
  }

  types(): string[] {
    return [...this.specs.keys()].sort();
  }

  currentVersion(type: string): number {
    const spec = this.specs.get(type);
    if (!spec) throw new Error(`unknown event type ${type}`);
    return spec.version;
  }

  /** Validate a payload a writer is about to append, at the current version. */
  validatePayload(type: string, payload: unknown): Decoded<unknown> {
    const spec = this.specs.get(type);
    if (!spec) return { ok: false, rejection: { code: 'unknown_event_type', message: `unknown event type ${type}`, issues: [] } };
    const parsed = spec.schema.safeParse(payload);
    return parsed.success ? { ok: true, value: parsed.data } : { ok: false, rejection: rejectionFromZod(parsed.error) };
  }

  /** Decode an envelope read from a stream, upcasting it to the current version of its type. */
  decode(raw: unknown): Decoded<EventEnvelope> {
    const envelope = EventEnvelopeSchema.safeParse(raw);
    if (!envelope.success) return { ok: false, rejection: rejectionFromZod(envelope.error) };
    const env = envelope.data;
    const spec = this.specs.get(env.type);
    if (!spec) {
      return { ok: false, rejection: { code: 'unknown_event_type', message: `unknown event type ${env.type}`, issues: [] } };
    }
    if (env.version > spec.version) {
      return {
        ok: false,
        rejection: {
          code: 'unsupported_version',
          message: `${env.type} v${env.version} is newer than this build understands (v${spec.version})`,
          issues: [],
        },
      };
    }
    let payload = env.payload;
    for (let v = env.version; v < spec.version; v++) {
      const up = spec.upcasters?.[v];
      if (!up) {
        return { ok: false, rejection: { code: 'unsupported_version', message: `${env.type}: no upcaster from v${v}`, issues: [] } };
      }
      payload = up(payload);
    }
    let parsed = spec.schema.safeParse(payload);
    if (parsed.success) return { ok: true, value: { ...env, version: spec.version, payload: parsed.data } };
    // Keys this build does not know were written by a newer one (an optional field added since):
    // they are left out and the rest is checked as usual (`withoutUnknownKeys`, tolerant.ts). Only
    // services write events and each validates what it appends strictly (`validatePayload`).
    const known = withoutUnknownKeys(parsed.error, payload);
    if (known !== null) {
      payload = known;
      parsed = spec.schema.safeParse(payload);
      if (parsed.success) return { ok: true, value: { ...env, version: spec.version, payload: parsed.data } };
    }
    // A stored event is read as it was valid when written: names that were refused only later are
    // taken as they are (see onlyLaterReservedNames).
    if (onlyLaterReservedNames(parsed.error, payload)) return { ok: true, value: { ...env, version: spec.version, payload } };
    return { ok: false, rejection: rejectionFromZod(parsed.error) };
  }
}

const RESERVED: ReadonlySet<unknown> = new Set(RESERVED_NAMES);

/**
 * Does `error` refuse `payload` for nothing but a reserved name (`__proto__`, `constructor`,
 * `prototype`) in a value position — an agent, step, mesh or variable so named? Such names were
 * accepted until the rule that reserves them; an event that holds one was valid when the store
 * wrote it, and a stored event must keep decoding (its history is not rewritten). Only new
 * messages, commands and appends are held to the rule (`validatePayload`, the services' request
 * schemas). A reserved name as a record key is not tolerated: the message edge refused those keys
 * at any depth before the rule, so no stored event holds one. Every issue must be a name
 * pattern's refusal of a string that is one of the names; anything else wrong refuses the event as
 * before.
 */
function onlyLaterReservedNames(error: z.ZodError, payload: unknown): boolean {
  if (error.issues.length === 0) return false;
  return error.issues.every(
    (issue) =>
      issue.code === 'invalid_format' &&
      issue.message.includes(RESERVED_NAME_MESSAGE) &&
      !RESERVED.has(issue.path[issue.path.length - 1]) &&
      RESERVED.has(valueAt(payload, issue.path)),
  );
}
