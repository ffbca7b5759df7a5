import { z } from 'zod';
import { AgentResultSchema } from './agent-result';
import { ClaimWithdrawnSchema } from './claim-withdrawn';
import { ResultRefusedSchema } from './result-refused';
import { createEventRegistry } from './catalogue';
import { EventEnvelopeSchema } from './envelope';
import { EdgeRefusalReplySchema } from './edge';
import { AgentRunConfigSchema } from './sentinel-schema';
import { OperatorAnswerSchema, StopPacketSchema } from './stop-packet';
import * as handoff from './handoff';
import { HumanActionNoticeSchema } from './notice';
import { CompleteThenCreateCommandSchema, OpenOffersCommandSchema, OpenOffersReplySchema, withIdentityClaims } from './ledger-access';
import { CompleteThenCreateReplySchema, LedgerReplySchema } from './ledger-protocol';
import { MeshAnswerRequestSchema, MeshStartRequestSchema } from './mesh';
import { ProjectDefinitionSchema } from './definition';
import { PauseProjectRequestSchema, ProjectControlReplySchema, ResumeProjectRequestSchema } from './governance';
import { PublishDefinitionReplySchema, RunAnswerRequestSchema, SessionMessageSchema, StartRunRequestSchema, StopRunRequestSchema } from './run-requests';
import { ReturnedAnswerSchema } from './run';
import { OperatorApiRequestSchemas } from './operator-api';

/**
 * The wire contracts a producer in another language needs, by file name. `baton schemas` writes
 * them to docs/schemas; a test keeps the committed copies in step with the zod sources. A ledger
 * command (`ledger-<command>`, not its reply) is published as it goes on the wire: the command
 * plus the optional envelope fields `actor`, `actor_kind`, `actor_role` (`withIdentityClaims`).
 * The operator HTTP API's POST bodies are published by the names of {@link OperatorApiRequestSchemas}
 * (`operator-answer-request`, `hold-answer-request`…).
 */
export function wireSchemas(): Record<string, z.ZodType> {
  const schemas: Record<string, z.ZodType> = {
    'agent-result': AgentResultSchema,
    'agent-run-config': AgentRunConfigSchema,
    'event-envelope': EventEnvelopeSchema,
    'stop-packet': StopPacketSchema,
    'operator-answer': OperatorAnswerSchema,
    'human-action-notice': HumanActionNoticeSchema,
    'project-definition': ProjectDefinitionSchema,
    'publish-definition-reply': PublishDefinitionReplySchema,
    'start-run-request': StartRunRequestSchema,
    'stop-run-request': StopRunRequestSchema,
    'session-message': SessionMessageSchema,
    'run-answer-request': RunAnswerRequestSchema,
    'mesh-start-request': MeshStartRequestSchema,
    'mesh-answer-request': MeshAnswerRequestSchema,
    'handoff-record': handoff.HandoffRecordSchema,
    'returned-answer': ReturnedAnswerSchema,
    'claim-withdrawn': ClaimWithdrawnSchema,
    'result-refused': ResultRefusedSchema,
    'edge-refusal-reply': EdgeRefusalReplySchema,
    'ledger-reply': LedgerReplySchema,
    'ledger-open-offers': withIdentityClaims(OpenOffersCommandSchema),
    'ledger-open-offers-reply': OpenOffersReplySchema,
    'ledger-complete-then-create': withIdentityClaims(CompleteThenCreateCommandSchema),
    'ledger-complete-then-create-reply': CompleteThenCreateReplySchema,
    'ledger-pause': withIdentityClaims(PauseProjectRequestSchema),
    'ledger-resume': withIdentityClaims(ResumeProjectRequestSchema),
    'ledger-project-control-reply': ProjectControlReplySchema,
  };
  // The operator HTTP API's request bodies, as its controllers parse them (the OpenAPI document's too).
  for (const [name, { schema }] of Object.entries(OperatorApiRequestSchemas)) schemas[name] = schema;
  const extra = handoff as unknown as Record<string, unknown>;
  for (const [name, value] of Object.entries(extra)) {
    const match = /^(.*)CommandSchema$/.exec(name);
    if (match && value instanceof z.ZodType) schemas[`ledger-${kebab(match[1]!)}`] = withIdentityClaims(value);
  }
  return schemas;
}

/**
 * The wire contracts Baton writes and a client only reads: records, replies, notices, events. A
 * newer Baton may add optional fields to them (docs/event-sourcing.md rule 1), and Baton's own
 * readers leave such fields out (`parseIgnoringUnknownKeys`), so their JSON Schemas allow
 * properties they do not list ({@link allowingUnlistedProperties}). What a client sends stays
 * strict: a key its schema does not name is refused.
 */
export const READ_ONLY_WIRE_SCHEMAS: ReadonlySet<string> = new Set([
  'event',
  'event-envelope',
  'handoff-record',
  'returned-answer',
  'claim-withdrawn',
  'result-refused',
  'edge-refusal-reply',
  'stop-packet',
  'human-action-notice',
  'ledger-reply',
  'ledger-open-offers-reply',
  'ledger-complete-then-create-reply',
  'ledger-project-control-reply',
  'publish-definition-reply',
]);

/**
 * `json` (a generated JSON Schema) with every `additionalProperties: false` left out, at any depth:
 * the schema of a record a reader must accept with fields a newer writer added. Schemas of records'
 * maps (`additionalProperties: {…}`) are kept. Returns a copy.
 */
export function allowingUnlistedProperties<T>(json: T): T {
  if (Array.isArray(json)) return json.map((item) => allowingUnlistedProperties(item) as unknown) as T;
  if (typeof json !== 'object' || json === null) return json;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (key === 'additionalProperties' && value === false) continue;
    out[key] = allowingUnlistedProperties(value);
  }
  return out as T;
}

/** JSON Schema (draft 2020-12) documents for every wire contract, keyed by file name. */
export function generateJsonSchemas(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(wireSchemas()).sort(([a], [b]) => a.localeCompare(b))) out[name] = contractJsonSchema(name, schema);
  out[EVENT_SCHEMA_NAME] = eventJsonSchema();
  return out;
}

/**
 * The JSON Schema of one wire contract (`schema`, published as `docs/schemas/<name>.json`): what
 * {@link generateJsonSchemas} writes for it. The operator API's OpenAPI document takes its request
 * bodies from here too, so a body's schema there is its published file (without `$schema`, `$id`).
 */
export function contractJsonSchema(name: string, schema: z.ZodType): Record<string, unknown> {
  const generated = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  const json = READ_ONLY_WIRE_SCHEMAS.has(name) ? allowingUnlistedProperties(generated) : generated;
  return { $id: `https://baton.dev/schemas/${name}.json`, title: name, ...json };
}

/** The file name (without `.json`) of {@link eventJsonSchema}. */
export const EVENT_SCHEMA_NAME = 'event';

/**
 * The JSON Schema of an event as the events stream holds it: the envelope (`event-envelope.json`),
 * and for every event type Baton writes, the payload of that type at its current version (a
 * conditional per type: `if` the type and version are these, `then` the payload is this). An event
 * of an older version of its type has its envelope checked only: readers upcast it
 * (docs/event-sourcing.md). Read-only, so unlisted properties are allowed, as in every record a
 * newer Baton may add fields to. Generated from the event catalogue (`createEventRegistry`), so a
 * new event type or field is in it without a list to keep.
 */
export function eventJsonSchema(): Record<string, unknown> {
  const registry = createEventRegistry();
  const envelope = allowingUnlistedProperties(z.toJSONSchema(EventEnvelopeSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>);
  const { $schema, ...envelopeBody } = envelope;
  const payloads = registry.types().map((type) => {
    const spec = registry.spec(type)!;
    const { $schema: _inner, ...payload } = allowingUnlistedProperties(
      z.toJSONSchema(spec.schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>,
    );
    return {
      if: { properties: { type: { const: type }, version: { const: spec.version } }, required: ['type', 'version'] },
      then: { properties: { payload } },
    };
  });
  return {
    $schema,
    $id: `https://baton.dev/schemas/${EVENT_SCHEMA_NAME}.json`,
    title: EVENT_SCHEMA_NAME,
    description: `An event of the events stream: its envelope, and the payload of its type at the current version (${registry.types().length} types). An older version's payload is not checked: readers upcast it.`,
    ...envelopeBody,
    allOf: payloads,
  };
}

function kebab(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
}
