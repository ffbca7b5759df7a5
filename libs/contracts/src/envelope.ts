import { z } from 'zod';
import { IdSchema, IsoTimeSchema, ProjectIdSchema } from './common';

/** Who or what produced an event. `engine_fallback` marks a decision Baton synthesised for an agent. */
export const Origin = {
  agent: 'agent',
  engineFallback: 'engine_fallback',
  human: 'human',
  operator: 'operator',
  watchdog: 'watchdog',
} as const;
export type Origin = (typeof Origin)[keyof typeof Origin];
export const OriginSchema = z.enum(['agent', 'engine_fallback', 'human', 'operator', 'watchdog']);

/** The aggregates Baton keeps. Each instance has its own subject and is written by one service. */
export const AggregateKind = {
  handoff: 'handoff',
  run: 'run',
  definition: 'definition',
  mesh: 'mesh',
  /** A project's control aggregate (kill switch; id `control`), written by the ledger. */
  project: 'project',
} as const;
export type AggregateKind = (typeof AggregateKind)[keyof typeof AggregateKind];
export const AggregateKindSchema = z.enum(['handoff', 'run', 'definition', 'mesh', 'project']);

export const EventTypeSchema = z
  .string()
  .min(3)
  .max(80)
  .regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, 'event types are dotted lowercase names such as handoff.claimed');

/**
 * The envelope every event travels in, on the wire and in the streams. `payload` is validated
 * against the schema registered for (type, version) by {@link EventRegistry}; older versions are
 * upcast on read.
 */
export const EventEnvelopeSchema = z.object({
  id: IdSchema,
  type: EventTypeSchema,
  version: z.number().int().min(1).max(1000),
  aggregate: z.object({ kind: AggregateKindSchema, id: IdSchema }),
  project: ProjectIdSchema,
  occurredAt: IsoTimeSchema,
  actor: z.string().min(1).max(200),
  origin: OriginSchema,
  causationId: IdSchema.nullable(),
  correlationId: IdSchema,
  payload: z.unknown(),
});
export type EventEnvelope<P = unknown> = Omit<z.infer<typeof EventEnvelopeSchema>, 'payload'> & { payload: P };

/**
 * The NATS headers the event store writes on every stored event, so a consumer can filter or route
 * a message without parsing its body (the schema fingerprint: docs/event-sourcing.md rule 1).
 */
export const EventHeader = {
  type: 'Baton-Event-Type',
  version: 'Baton-Event-Version',
  schema: 'Baton-Schema',
} as const;

/** Metadata a writer supplies with new events; the store adds ids and versions. */
export interface EventMetadata {
  project: string;
  occurredAt: string;
  actor: string;
  origin: Origin;
  causationId: string | null;
  correlationId: string;
}

/** A map from event type to the zod schema of its current payload. */
export type EventSchemaMap = Record<string, z.ZodType>;

/**
 * Whom one event of a command speaks for when it is not the command's own actor: the customer whose
 * queued words a later command (an agent's reply) delivers. Set by a decider from what the aggregate
 * already recorded (the subject a message came on), never from a body; the store writes it as the
 * event's `actor` and `origin` in place of the command's.
 */
export interface EventAttribution {
  actor: string;
  origin: Origin;
}

/** The domain-facing shape of an event: its type, its validated payload and, rarely, whom it speaks for. */
export type DomainEventOf<M extends EventSchemaMap> = {
  [K in keyof M & string]: { type: K; data: z.infer<M[K]>; by?: EventAttribution };
}[keyof M & string];
