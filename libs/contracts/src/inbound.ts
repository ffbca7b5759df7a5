import type { z } from 'zod';
import { AgentResultSchema, AgentResultWireSchema } from './agent-result';
import { MeshAnswerRequestSchema, MeshStartRequestSchema } from './mesh';
import { MsgIds } from './msg-ids';
import { Limits } from './common';
import { decodeUtf8, parseUntrustedJson, RejectionCode, rejectionFromZod, type Rejection } from './rejection';
import { RunAnswerRequestSchema, SessionMessageSchema, StartRunRequestSchema, StopRunRequestSchema } from './run-requests';

/*
 * How an inbox message's body is read wherever it is read: by the consumer that acts on it (the
 * router) and, for what agents publish, by the agent edge before it relays it (the ledger). One
 * reading in both places, so the edge refuses exactly what the consumer would.
 */

/** A decoded input, or the typed rejection it earned. */
export type Inbound<T> = { ok: true; value: T } | { ok: false; rejection: Rejection };

/**
 * Decode untrusted bytes from an entry point: size cap (`Limits.maxMessageBytes`), strict UTF-8
 * (bytes that are not UTF-8 are `invalid_utf8`, never decoded with replacement characters), JSON
 * with prototype-polluting keys refused, then the zod schema. Never throws.
 */
export function decodeInbound<S extends z.ZodType>(bytes: Uint8Array | string, schema: S): Inbound<z.infer<S>> {
  if (typeof bytes !== 'string' && bytes.length > Limits.maxMessageBytes) {
    return {
      ok: false,
      rejection: { code: RejectionCode.payloadTooLarge, message: `payload is ${bytes.length} bytes; the cap is ${Limits.maxMessageBytes}`, issues: [] },
    };
  }
  const text = typeof bytes === 'string' ? { ok: true as const, value: bytes } : decodeUtf8(bytes);
  if (!text.ok) return text;
  const json = parseUntrustedJson(text.value, Limits.maxMessageBytes);
  if (!json.ok) return json;
  const parsed = schema.safeParse(json.value);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, rejection: rejectionFromZod(parsed.error) };
}

/** Who a subject says a message is from: its project and, on an agent's result subject, the agent its body must name. */
export interface SubjectIdentity {
  project: string;
  agent: string | null;
}

/**
 * Why a body disagrees with the identity its subject carries, or null: identity comes from the
 * subject, and a body is only checked against it. Another project in the body (or a subject that
 * carries no identity) is `project_mismatch`; another agent, `identity_mismatch` (the ledger's
 * codes for the same refusals).
 */
export function bodyIdentityRefusal(
  identity: SubjectIdentity | null,
  body: { project: string; agent?: string },
): { code: RejectionCode; message: string } | null {
  if (identity === null || identity.project !== body.project) {
    return { code: RejectionCode.projectMismatch, message: `the subject names project '${identity?.project ?? '?'}', the body '${body.project}'` };
  }
  if (identity.agent !== null && identity.agent !== body.agent) {
    return { code: RejectionCode.identityMismatch, message: `the subject names agent '${identity.agent}', the body '${body.agent ?? '?'}'` };
  }
  return null;
}

/**
 * The schema each inbox kind's body is read with. A run's result is read with its wire schema (a
 * typed `decision` that breaks the contract is no refusal: the run takes the no-action default);
 * a mesh turn with the strict one.
 */
export const InboxBodySchemas = {
  start: StartRunRequestSchema,
  result: AgentResultWireSchema,
  message: SessionMessageSchema,
  answer: RunAnswerRequestSchema,
  stop: StopRunRequestSchema,
  mesh_start: MeshStartRequestSchema,
  mesh_result: AgentResultSchema,
  mesh_answer: MeshAnswerRequestSchema,
} as const;
export type InboxBodyKind = keyof typeof InboxBodySchemas;

/** The inbox kinds whose body names the agent its subject names (a result, a mesh turn); the others name no agent. */
export const AGENT_NAMING_KINDS: ReadonlySet<InboxBodyKind> = new Set(['result', 'mesh_result']);

/**
 * The `Nats-Msg-Id` a body of this kind goes under (README, "For agent microservices"), or null for
 * a kind no client publishes. Derived from the body alone, so one message has one id.
 */
export function msgIdOfBody(kind: InboxBodyKind, body: Record<string, unknown>): string | null {
  const text = (key: string) => (typeof body[key] === 'string' ? (body[key] as string) : '');
  const project = text('project');
  switch (kind) {
    case 'start':
      return MsgIds.start(project, text('workflow_run_id'));
    case 'result':
      return MsgIds.result(project, text('workflow_run_id'), text('result_id'));
    case 'message':
      return MsgIds.message(project, text('workflow_run_id'), text('message_id'));
    case 'mesh_start':
      return MsgIds.meshStart(project, text('mesh_run_id'));
    case 'mesh_result':
      return MsgIds.meshResult(project, text('workflow_run_id'), text('result_id'));
    default:
      return null;
  }
}
