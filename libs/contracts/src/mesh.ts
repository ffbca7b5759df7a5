import { z } from 'zod';
import { EvidenceSchema, HandoffToolCallSchema, PendingToolCallSchema } from './agent-result';
import { AgentNameSchema, IdSchema, MeshNameSchema, IsoTimeSchema, Limits, namedRecord, ProjectIdSchema, RecordKeySchema, ShortTextSchema } from './common';
import { ownValue } from './own';
import { ActorNameSchema } from './handoff';
import { DomainEventOf } from './envelope';
import { HumanActionNoticeSchema, NoticeRecipientSchema, PersonHandleSchema } from './notice';
import { OperatorAnswerSchema, ResumeEffectSchema, StopPacketSchema } from './stop-packet';

/**
 * Handoff meshes (seed 004): a group of agents sharing one conversation, where the agent that
 * just spoke picks the next speaker by calling one of its `handoff_to_<target>` tools. The entry
 * agent speaks first; a turn with no handoff call ends the mesh with its output; a ping-pong that
 * reaches the iteration cap stops with a stop packet (why `thrash`).
 *
 * Wire: a mesh starts on `<prefix>.in.<project>.mesh_start` ({@link MeshStartRequest}); each turn
 * is an `AgentResult` (with `workflow_run_id` = the mesh run id and the turn's
 * `handoff_tool_calls`) published on `<prefix>.in.<project>.mesh_result.<agent>`.
 */

/** Default cap on the turns of one mesh run (the group chat's 40-turn cap). */
export const DEFAULT_MESH_MAX_ITERATIONS = 40;

/** The most turns a mesh may be given, by its definition or by an operator raising its cap. */
export const MESH_CAP_MAX = 1_000;

/**
 * One mesh of a project definition.
 * - `entry`: the agent that speaks first;
 * - `handoffs`: per agent, the agents it may hand off to (each becomes a `handoff_to_<target>` tool);
 * - `outputs`: the agents whose final turn is the mesh's output (empty = every participant);
 * - `max_iterations`: the most turns one run may take before a ping-pong is stopped (default 40).
 * Semantic checks against the project's agents are in {@link validateMesh}.
 */
export const MeshDefinitionSchema = z.strictObject({
  name: MeshNameSchema,
  description: ShortTextSchema.optional(),
  entry: AgentNameSchema,
  handoffs: namedRecord(AgentNameSchema, z.array(AgentNameSchema).max(Limits.maxListItems)).default({}),
  outputs: z.array(AgentNameSchema).max(Limits.maxListItems).default([]),
  max_iterations: z.number().int().min(1).max(MESH_CAP_MAX).default(DEFAULT_MESH_MAX_ITERATIONS),
});
export type MeshDefinition = z.infer<typeof MeshDefinitionSchema>;
export type MeshDefinitionInput = z.input<typeof MeshDefinitionSchema>;

/** Stable codes of the mesh build checks. */
export const MeshDiagnosticCode = {
  unknownEntry: 'MESH_UNKNOWN_ENTRY',
  unknownAgent: 'MESH_UNKNOWN_AGENT',
  unknownTarget: 'MESH_UNKNOWN_TARGET',
  unknownOutput: 'MESH_UNKNOWN_OUTPUT_AGENT',
  selfHandoff: 'MESH_SELF_HANDOFF',
  duplicateTarget: 'MESH_DUPLICATE_HANDOFF',
  toolNameCollision: 'MESH_TOOL_NAME_COLLISION',
  duplicateMesh: 'MESH_DUPLICATE_NAME',
} as const;
export type MeshDiagnosticCode = (typeof MeshDiagnosticCode)[keyof typeof MeshDiagnosticCode];

/** One refusal of a mesh build, with the path inside the mesh definition and a hint. */
export interface MeshDiagnostic {
  code: MeshDiagnosticCode;
  path: (string | number)[];
  message: string;
}

/** The tool-name form of a target: every character outside [A-Za-z0-9_] becomes `_`, then lowercase. */
export function sanitizeToolTarget(target: string): string {
  return target.replace(/[^A-Za-z0-9_]/g, '_').toLowerCase();
}

/** The handoff tool an agent calls to hand the conversation to `target`: `handoff_to_<sanitized target>`. */
export function handoffToolName(target: string): string {
  return `handoff_to_${sanitizeToolTarget(target)}`;
}

/** The agents `agent` may hand off to in `mesh` (none when it has no `handoffs` entry). */
export function grantedTargets(mesh: Pick<MeshDefinition, 'handoffs'>, agent: string): readonly string[] {
  return ownValue(mesh.handoffs, agent) ?? [];
}

/** Every agent a mesh names: the entry, each agent with handoffs, each target and each output agent. */
export function meshParticipants(mesh: Pick<MeshDefinition, 'entry' | 'handoffs' | 'outputs'>): string[] {
  const names = new Set<string>([mesh.entry]);
  for (const [from, targets] of Object.entries(mesh.handoffs)) {
    names.add(from);
    for (const target of targets) names.add(target);
  }
  for (const output of mesh.outputs) names.add(output);
  return [...names];
}

/**
 * The build checks of one mesh against the project's agents (pure; an empty list means the mesh
 * builds): the entry agent exists; every agent with handoffs, every target and every output agent
 * exists; no agent hands off to itself (`MESH_SELF_HANDOFF`); no target is listed twice for one
 * agent; and no two targets of one agent sanitize to the same `handoff_to_<target>` tool name
 * (`MESH_TOOL_NAME_COLLISION`), which would make the agent's calls ambiguous.
 */
export function validateMesh(mesh: MeshDefinition, agents: readonly string[]): MeshDiagnostic[] {
  const known = new Set(agents);
  const out: MeshDiagnostic[] = [];
  const where = `mesh '${mesh.name}'`;
  if (!known.has(mesh.entry)) {
    out.push({
      code: MeshDiagnosticCode.unknownEntry,
      path: ['entry'],
      message: `${where}: entry agent '${mesh.entry}' is not listed in the project's agents`,
    });
  }
  for (const [from, targets] of Object.entries(mesh.handoffs)) {
    if (!known.has(from)) {
      out.push({ code: MeshDiagnosticCode.unknownAgent, path: ['handoffs', from], message: `${where}: agent '${from}' is not listed in the project's agents` });
    }
    const tools = new Map<string, string>();
    const seen = new Set<string>();
    targets.forEach((target, index) => {
      const path = ['handoffs', from, index];
      if (!known.has(target)) {
        out.push({
          code: MeshDiagnosticCode.unknownTarget,
          path,
          message: `${where}: '${from}' hands off to '${target}', which is not listed in the project's agents`,
        });
      }
      if (target === from) {
        out.push({
          code: MeshDiagnosticCode.selfHandoff,
          path,
          message: `${where}: '${from}' may not hand off to itself; a turn that wants to keep talking simply ends without a handoff call`,
        });
        return;
      }
      if (seen.has(target)) {
        out.push({ code: MeshDiagnosticCode.duplicateTarget, path, message: `${where}: '${from}' lists target '${target}' twice` });
        return;
      }
      seen.add(target);
      // A target that is no agent name at all is refused as such (the schema); naming its tool too would only repeat it.
      if (!AgentNameSchema.safeParse(target).success) return;
      const tool = handoffToolName(target);
      const other = tools.get(tool);
      if (other !== undefined) {
        out.push({
          code: MeshDiagnosticCode.toolNameCollision,
          path,
          message: `${where}: targets '${other}' and '${target}' of '${from}' both become the tool '${tool}'; rename one agent`,
        });
      } else {
        tools.set(tool, target);
      }
    });
  }
  mesh.outputs.forEach((output, index) => {
    if (!known.has(output)) {
      out.push({
        code: MeshDiagnosticCode.unknownOutput,
        path: ['outputs', index],
        message: `${where}: output agent '${output}' is not listed in the project's agents`,
      });
    }
  });
  return out;
}

/** The checks of a project's meshes: each mesh's {@link validateMesh}, and mesh names are unique. */
export function validateMeshes(meshes: readonly MeshDefinition[], agents: readonly string[]): MeshDiagnostic[] {
  const names = new Set<string>();
  const out: MeshDiagnostic[] = [];
  meshes.forEach((mesh, index) => {
    if (names.has(mesh.name)) {
      out.push({ code: MeshDiagnosticCode.duplicateMesh, path: [index, 'name'], message: `mesh '${mesh.name}' is defined twice` });
    }
    names.add(mesh.name);
    for (const diagnostic of validateMesh(mesh, agents)) out.push({ ...diagnostic, path: [index, ...diagnostic.path] });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Requests

/**
 * Start a mesh run (JetStream publish on `<prefix>.in.<project>.mesh_start`, `Nats-Msg-Id` =
 * `mesh_start:<project>:<mesh_run_id>`). `mesh_run_id` is the caller's id and the mesh aggregate's id, so the same start
 * twice starts one mesh. `input` is the user's message the entry agent answers first.
 * `started_by` is the person a stop of the mesh notifies (seed 000 §5); without it the project's
 * `lead` is notified when the lead is a person, and a mesh with neither is refused
 * (`no_notice_recipient`).
 */
export const MeshStartRequestSchema = z.strictObject({
  mesh_run_id: IdSchema,
  project: ProjectIdSchema,
  mesh: AgentNameSchema,
  input: z.string().max(Limits.maxBodyChars).optional(),
  started_by: PersonHandleSchema.optional(),
  variables: namedRecord(RecordKeySchema.max(200), z.unknown()).optional(),
});
export type MeshStartRequest = z.infer<typeof MeshStartRequestSchema>;

/** Who may answer a mesh's stop packet (the publisher sets it after authenticating the person). */
export const MeshAnswerActorRoleSchema = z.enum(['operator', 'admin', 'viewer', 'agent']);

/**
 * An operator's answer to a mesh's stop packet (JetStream publish on
 * `<prefix>.in.<project>.mesh_answer`, `Nats-Msg-Id` = `mesh_answer:<project>:<mesh_run_id>/<answer_id>`). The router applies it
 * to the mesh aggregate: `raise_cap` lets the mesh continue with the higher cap (the agent the
 * refused handoff named speaks next); `deny` / `acknowledge` end the mesh (`mesh.terminated`).
 * `answer_id` is the idempotency key: the same answer applied twice changes nothing.
 */
export const MeshAnswerRequestSchema = z.strictObject({
  mesh_run_id: IdSchema,
  project: ProjectIdSchema,
  actor_role: MeshAnswerActorRoleSchema,
  answer: OperatorAnswerSchema,
});
export type MeshAnswerRequest = z.infer<typeof MeshAnswerRequestSchema>;

// ---------------------------------------------------------------------------------------------
// Events of the mesh aggregate (id = mesh_run_id; written only by the router)

export const MeshStatusSchema = z.enum(['running', 'completed', 'stopped', 'terminated']);
export type MeshStatus = z.infer<typeof MeshStatusSchema>;

/** Why a handoff call was ignored: it named no agent of the mesh, or an agent this speaker may not reach. */
export const MeshIgnoreReasonSchema = z.enum(['unknown_tool', 'not_granted']);
export type MeshIgnoreReason = z.infer<typeof MeshIgnoreReasonSchema>;

/** The turn whose text is the mesh's output. */
export const MeshOutputSchema = z.strictObject({
  agent: AgentNameSchema,
  turn: z.number().int().min(1),
  result_id: IdSchema,
  text: z.string().max(Limits.maxBodyChars),
});
export type MeshOutput = z.infer<typeof MeshOutputSchema>;

export const MeshStartedSchema = z.strictObject({
  mesh_run_id: IdSchema,
  project: ProjectIdSchema,
  /** The mesh as defined when the run started (a run keeps it, whatever is published later). */
  mesh: MeshDefinitionSchema,
  input: z.string().max(Limits.maxBodyChars).nullable(),
  started_by: PersonHandleSchema.nullable(),
  variables: namedRecord(RecordKeySchema.max(200), z.unknown()),
  /** The handoff the entry agent's first turn is offered with. */
  handoff_id: IdSchema,
  /**
   * The one person a stop of this mesh notifies (seed 000 §5): `started_by`, else the project's
   * lead when it is a person. Absent on meshes started before notices existed.
   */
  notify: NoticeRecipientSchema.optional(),
  started_at: IsoTimeSchema,
});

export const MeshTurnRecordedSchema = z.strictObject({
  result_id: IdSchema,
  run_id: IdSchema,
  agent: AgentNameSchema,
  /** 1 for the entry agent's first turn. */
  turn: z.number().int().min(1),
  text: z.string().max(Limits.maxBodyChars),
  handoff_tool_calls: z.array(HandoffToolCallSchema).max(Limits.maxListItems),
  /** The handoff this turn answered (closed by the router through the ledger). */
  handoff_id: IdSchema.nullable(),
  /** The claim on that handoff the turn was accepted under, carried to the ledger (docs/handoffs.md rule 4a; absent on turns recorded before it was kept). */
  claim_id: IdSchema.optional(),
  /** The agent's evidence (its result's), carried to the ledger when the turn closes its handoff (absent on turns recorded before it was kept). */
  evidence: EvidenceSchema.optional(),
  recorded_at: IsoTimeSchema,
});

export const MeshHandoffIgnoredSchema = z.strictObject({
  result_id: IdSchema,
  agent: AgentNameSchema,
  tool: z.string().min(1).max(200),
  call_id: IdSchema.optional(),
  /** The mesh agent the tool names, when it names one. */
  target: AgentNameSchema.nullable(),
  reason: MeshIgnoreReasonSchema,
  detail: ShortTextSchema,
  ignored_at: IsoTimeSchema,
});

/**
 * What the agent handing off wrote for the next one: the handoff tool call's `reason` and
 * `message` arguments (the SDK's handoff tools declare them), when they were text, each clipped to
 * `Limits.maxShortText`. The next turn's offer carries it (`context.mesh.handover`).
 */
export const MeshHandoverSchema = z.strictObject({
  reason: ShortTextSchema.optional(),
  message: ShortTextSchema.optional(),
});
export type MeshHandover = z.infer<typeof MeshHandoverSchema>;

export const MeshHandedOffSchema = z.strictObject({
  result_id: IdSchema,
  from: AgentNameSchema,
  to: AgentNameSchema,
  tool: z.string().min(1).max(200),
  call_id: IdSchema.optional(),
  /** The handoff the next turn is offered with (derived from the result id). */
  handoff_id: IdSchema,
  /** The turn number the target speaks at. */
  turn: z.number().int().min(2),
  /** The call's `reason` / `message` for the target (absent when it gave neither as text, and on handoffs stored before it was kept). */
  handover: MeshHandoverSchema.optional(),
  /**
   * Set when an operator's answer to an agent's own stop made this handoff (`tool` is then
   * `operator_answer`): the answer, and what it hands the agent — the frozen call approved, a raised
   * cap, or the frozen call handed on (not approved) — as a workflow run's `run.routed` does.
   */
  resume: z
    .strictObject({
      answer_id: IdSchema,
      action: z.string().min(1).max(40),
      approved_call: PendingToolCallSchema.optional(),
      raised_cap: z.number().positive().optional(),
      pending_call: PendingToolCallSchema.optional(),
    })
    .optional(),
  handed_off_at: IsoTimeSchema,
});

export type MeshHandedOff = z.infer<typeof MeshHandedOffSchema>;

export const MeshCompletedSchema = z.strictObject({
  result_id: IdSchema,
  /** The agent whose turn (with no handoff call) ended the mesh. */
  agent: AgentNameSchema,
  turns: z.number().int().min(1),
  /** The final turn of an output agent (null when no output agent spoke). */
  output: MeshOutputSchema.nullable(),
  completed_at: IsoTimeSchema,
});

export const MeshStoppedSchema = z.strictObject({
  /** The stop packet: why `thrash` when the iteration cap ended a ping-pong; the agent's own `why` when its turn stopped. */
  packet: StopPacketSchema,
  /** The turn that stopped it, or the packet id of a stop asked from outside (the watchdog's). */
  result_id: IdSchema,
  /** Turns recorded when it stopped (0: a stop from outside before the entry agent's first turn). */
  turns: z.number().int().min(0),
  max_iterations: z.number().int().min(1),
  /** The handoff the cap refused (absent when the agent's turn stopped the mesh itself). */
  refused: z.strictObject({ from: AgentNameSchema, to: AgentNameSchema, tool: z.string().min(1).max(200), handover: MeshHandoverSchema.optional() }).optional(),
  stopped_at: IsoTimeSchema,
  /** The person the admin connection said it stopped the mesh for: a claim beside the actor `admin` (as on `run.stopped`). */
  on_behalf_of: ActorNameSchema.optional(),
});

/** A turn the mesh refused (not the current speaker, a stale handoff, the mesh already ended). */
export const MeshTurnRejectedSchema = z.strictObject({
  result_id: IdSchema,
  agent: AgentNameSchema,
  code: z.string().min(1).max(80),
  message: ShortTextSchema,
  rejected_at: IsoTimeSchema,
  /**
   * What was refused: an agent's turn (`result_id` its result id) or an operator's answer to the
   * stop (`result_id` the answer id). Turn ids and answer ids are idempotency keys of their own
   * kinds, so an answer id equal to a turn's result id is still decided. Absent on events stored
   * before it was recorded: an answer's refusal then has agent `operator` and a message that
   * begins `answer <id> by`.
   */
  of: z.enum(['turn', 'answer']).optional(),
});

/**
 * An operator answered the mesh's open stop packet (decided with `decideResume`). `effect` is what
 * the answer does: `raise_cap` (the mesh continues, `max_iterations` becomes the new cap) or
 * `stop` (the mesh ends; `mesh.terminated` follows).
 */
export const MeshStopAnsweredSchema = z.strictObject({
  answer_id: IdSchema,
  answered_by: z.string().min(1).max(200),
  packet_id: IdSchema,
  answer: OperatorAnswerSchema,
  effect: ResumeEffectSchema,
  /** The mesh's iteration cap from now on (the raised cap, or unchanged). */
  max_iterations: z.number().int().min(1),
  answered_at: IsoTimeSchema,
});
/** The mesh ended without an output because an operator denied / acknowledged its stop. */
export const MeshTerminatedSchema = z.strictObject({
  reason: z.string().min(1).max(4_000),
  origin: z.literal('operator'),
  answer_id: IdSchema,
  terminated_at: IsoTimeSchema,
});
/** The one human action notice of a mesh stop (engine-owned, seed 000 §5); same shape as a run's. */
export const MeshNoticeEmittedSchema = z.strictObject({
  notice: HumanActionNoticeSchema,
});

export const MeshEventSchemas = {
  'mesh.started': MeshStartedSchema,
  'mesh.turn_recorded': MeshTurnRecordedSchema,
  'mesh.handoff_ignored': MeshHandoffIgnoredSchema,
  'mesh.handed_off': MeshHandedOffSchema,
  'mesh.completed': MeshCompletedSchema,
  'mesh.stopped': MeshStoppedSchema,
  'mesh.turn_rejected': MeshTurnRejectedSchema,
  'mesh.notice_emitted': MeshNoticeEmittedSchema,
  'mesh.stop_answered': MeshStopAnsweredSchema,
  'mesh.terminated': MeshTerminatedSchema,
} as const;
export type MeshEvent = DomainEventOf<typeof MeshEventSchemas>;
export type MeshEventType = keyof typeof MeshEventSchemas;
