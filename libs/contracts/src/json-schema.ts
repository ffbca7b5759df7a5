import { z } from 'zod';
import { AgentResultSchema } from './agent-result';
import { EventEnvelopeSchema } from './envelope';
import { AgentRunConfigSchema } from './sentinel-schema';
import { OperatorAnswerSchema, StopPacketSchema } from './stop-packet';
import * as handoff from './handoff';
import { HumanActionNoticeSchema } from './notice';
import { CompleteThenCreateCommandSchema, OpenOffersCommandSchema, OpenOffersReplySchema, withIdentityClaims } from './ledger-access';
import { CompleteThenCreateReplySchema, LedgerReplySchema } from './ledger-protocol';
import { MeshAnswerRequestSchema, MeshStartRequestSchema } from './mesh';
import { ProjectDefinitionSchema } from './definition';
import { PublishDefinitionReplySchema, RunAnswerRequestSchema, SessionMessageSchema, StartRunRequestSchema, StopRunRequestSchema } from './run-requests';

/**
 * The wire contracts a producer in another language needs, by file name. `baton schemas` writes
 * them to docs/schemas; a test keeps the committed copies in step with the zod sources. A ledger
 * command (`ledger-<command>`, not its reply) is published as it goes on the wire: the command
 * plus the optional envelope fields `actor`, `actor_kind`, `actor_role` (`withIdentityClaims`).
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
    'ledger-reply': LedgerReplySchema,
    'ledger-open-offers': withIdentityClaims(OpenOffersCommandSchema),
    'ledger-open-offers-reply': OpenOffersReplySchema,
    'ledger-complete-then-create': withIdentityClaims(CompleteThenCreateCommandSchema),
    'ledger-complete-then-create-reply': CompleteThenCreateReplySchema,
  };
  const extra = handoff as unknown as Record<string, unknown>;
  for (const [name, value] of Object.entries(extra)) {
    const match = /^(.*)CommandSchema$/.exec(name);
    if (match && value instanceof z.ZodType) schemas[`ledger-${kebab(match[1]!)}`] = withIdentityClaims(value);
  }
  return schemas;
}

/** JSON Schema (draft 2020-12) documents for every wire contract, keyed by file name. */
export function generateJsonSchemas(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(wireSchemas()).sort(([a], [b]) => a.localeCompare(b))) {
    const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    out[name] = { $id: `https://baton.dev/schemas/${name}.json`, title: name, ...json };
  }
  return out;
}

function kebab(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
}
