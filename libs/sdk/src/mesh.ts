import {
  AgentResultSchema,
  edgeSubjectOf,
  grantedTargets,
  handoffToolName,
  MeshDefinitionSchema,
  meshParticipants,
  MeshStartRequestSchema,
  MsgIds,
  ownValue,
  rejectionFromZod,
  Subjects,
  validateMesh,
  type AgentResult,
  type Evidence,
  type HandoffToolCall,
  type MeshDefinition,
  type MeshDefinitionInput,
  type MeshDiagnostic,
  type MeshStartRequest,
} from '@baton/contracts';
import type { NatsJetStream } from '@baton/eventstore';
import type { PublishReceipt } from './client';
import { BatonSdkError, InvalidInputError, SdkErrorCode } from './errors';
import { messageIdentity, publishOnce, publishRetryOf, SentMessageIds, type PublishRetry } from './sent-ids';

/**
 * Handoff meshes for agent authors (seed 004): the `handoff_to_<target>` tools to give an agent's
 * model, converters from a provider's tool calls to the `handoff_tool_calls` of a turn, and the
 * publishers of mesh starts and turns. See docs/meshes.md.
 */

/** A mesh that does not build (unknown agents, self-handoff, colliding tool names...). */
export class MeshBuildError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.meshInvalid;
  constructor(readonly diagnostics: MeshDiagnostic[]) {
    super(`the mesh does not build: ${diagnostics.map((d) => `${d.code}: ${d.message}`).join('; ')}`, { code: SdkErrorCode.meshInvalid });
    this.name = 'MeshBuildError';
  }
}

/** JSON Schema of a handoff tool's arguments (an object; every field optional). */
export interface HandoffToolParameters {
  type: 'object';
  properties: Record<string, { type: 'string'; description: string }>;
  required: string[];
  additionalProperties: false;
}

/** One handoff tool, provider-neutral. */
export interface MeshHandoffTool {
  /** `handoff_to_<target>` (target sanitized to [a-z0-9_]). */
  name: string;
  /** The agent the tool hands the conversation to. */
  target: string;
  description: string;
  parameters: HandoffToolParameters;
}

/** OpenAI-style function tool (Chat Completions `tools`). */
export interface OpenAiFunctionTool {
  type: 'function';
  function: { name: string; description: string; parameters: HandoffToolParameters };
}

/** Anthropic-style tool (Messages API `tools`). */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: HandoffToolParameters;
}

export interface MeshToolOptions {
  /** The project's agents, to check the mesh against (default: the mesh's own participants). */
  agents?: readonly string[];
  /** Role per agent, written into each tool's description. */
  roles?: Readonly<Record<string, string>>;
}

const PARAMETERS: HandoffToolParameters = {
  type: 'object',
  properties: {
    reason: { type: 'string', description: 'Why the conversation goes to this agent (shown to it).' },
    message: { type: 'string', description: 'Anything the next agent should know that is not in the conversation.' },
  },
  required: [],
  additionalProperties: false,
};

/**
 * The handoff tools of `agent` in a mesh: one `handoff_to_<target>` per target it may hand off
 * to, in definition order, with a JSON Schema for its arguments. The mesh is built first: a mesh
 * with an unknown agent or target, a self-handoff or colliding sanitized tool names throws
 * {@link MeshBuildError}, so a bad mesh fails before any model runs. An agent with no handoffs
 * gets no tools (its turns always end the mesh).
 * @throws MeshBuildError, InvalidInputError (the definition breaks MeshDefinitionSchema)
 */
export function meshHandoffTools(definition: MeshDefinitionInput | MeshDefinition, agent: string, options: MeshToolOptions = {}): MeshHandoffTool[] {
  const parsed = MeshDefinitionSchema.safeParse(definition);
  if (!parsed.success) throw new InvalidInputError('mesh definition', rejectionFromZod(parsed.error));
  const mesh = parsed.data;
  const diagnostics = validateMesh(mesh, options.agents ?? meshParticipants(mesh));
  if (diagnostics.length > 0) throw new MeshBuildError(diagnostics);
  return grantedTargets(mesh, agent).map((target) => {
    const role = options.roles ? ownValue(options.roles, target) : undefined;
    return {
      name: handoffToolName(target),
      target,
      description: `Hand the conversation to ${target}${role ? ` (${role})` : ''}. Call it when ${target} should answer next; it takes over after your turn.`,
      parameters: structuredClone(PARAMETERS),
    };
  });
}

/** {@link meshHandoffTools} as OpenAI-style `{ type: 'function', function: { name, description, parameters } }`. */
export function openAiHandoffTools(definition: MeshDefinitionInput | MeshDefinition, agent: string, options?: MeshToolOptions): OpenAiFunctionTool[] {
  return meshHandoffTools(definition, agent, options).map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

/** {@link meshHandoffTools} as Anthropic-style `{ name, description, input_schema }`. */
export function anthropicHandoffTools(definition: MeshDefinitionInput | MeshDefinition, agent: string, options?: MeshToolOptions): AnthropicTool[] {
  return meshHandoffTools(definition, agent, options).map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters }));
}

/** Is this a handoff tool name (`handoff_to_...`)? */
export function isHandoffToolName(name: string): boolean {
  return name.startsWith('handoff_to_') && name.length > 'handoff_to_'.length;
}

/**
 * The handoff calls of an OpenAI-style assistant message (`tool_calls`), in call order, as a
 * turn's `handoff_tool_calls`. Other tools are left out; unparseable arguments become `{}`.
 */
export function handoffCallsFromOpenAi(toolCalls: readonly { id?: string; function: { name: string; arguments?: string } }[]): HandoffToolCall[] {
  return toolCalls
    .filter((c) => isHandoffToolName(c.function.name))
    .map((c) => ({ tool: c.function.name, ...(c.id ? { call_id: c.id } : {}), arguments: parseArguments(c.function.arguments) }));
}

/** The handoff calls of an Anthropic-style content list (`tool_use` blocks), in call order. */
export function handoffCallsFromAnthropic(content: readonly { type: string; id?: string; name?: string; input?: unknown }[]): HandoffToolCall[] {
  const out: HandoffToolCall[] = [];
  for (const block of content) {
    if (block.type !== 'tool_use' || block.name === undefined || !isHandoffToolName(block.name)) continue;
    const input = block.input !== null && typeof block.input === 'object' && !Array.isArray(block.input) ? (block.input as Record<string, unknown>) : {};
    out.push({ tool: block.name, ...(block.id ? { call_id: block.id } : {}), arguments: input });
  }
  return out;
}

function parseArguments(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** One agent turn of a mesh, as an agent reports it. */
export interface MeshTurnInput {
  project: string;
  mesh_run_id: string;
  agent: string;
  /** Unique per turn; the idempotency key (a redelivered turn routes once). */
  result_id: string;
  /** The agent run that produced the turn (default: the result id). */
  run_id?: string;
  /** What the agent said this turn (the mesh's output if the turn ends it). */
  text: string;
  /** The handoff tools the agent called, in call order; the last valid one routes. Empty = end the mesh. */
  handoff_tool_calls?: HandoffToolCall[];
  /**
   * The handoff the turn was offered with, and the claim this agent holds on it (the claim rule,
   * docs/runs.md: a turn that names no handoff or no current claim is refused, `mesh.turn_rejected`).
   * A turn taken through `handoffs()` gets both from `offer.handoffId` and `offer.claimId`.
   */
  handoff_id?: string;
  claim_id?: string;
  /**
   * What shows the turn's work (tests run, artifacts, a work product): the ledger's evidence floor
   * records a turn's handoff as `partial` without it, as it does a workflow result's.
   */
  evidence?: Evidence;
  /**
   * Stop the mesh for a person (docs/meshes.md, "An agent's own stop"): the turn is recorded, its
   * handoff calls are not followed, and the mesh waits for an operator's answer to the packet built
   * from this `why` / `detail` / `cap`, what the agent `tried` and the call it had pending.
   */
  stop?: AgentResult['stop'];
  /** What the agent tried: `{ name, trace_id? }` objects (a tool or step name, and the trace it ran in), whose names become the stop packet's `tried` (the agent itself when it names nothing). */
  tried?: AgentResult['tried'];
  /** The call the agent was about to make when it stopped: frozen in the packet, approved or handed on by the answer. */
  pending_tool_call?: AgentResult['pending_tool_call'];
  /** Default: now. */
  produced_at?: string;
}

/**
 * What the mesh publishers need: a JetStream client and the deployment's prefix; optionally the
 * memory of the message ids this publisher sent (default: one memory for the whole process).
 */
export interface MeshPublisher {
  js: Pick<NatsJetStream, 'publish'>;
  prefix: string;
  sent?: SentMessageIds;
  /**
   * The agent whose credentials this connection holds: `startMesh` then publishes on
   * `<prefix>.in.<project>.mesh_start.<agent>` and the mesh's start records it as the actor. Without
   * it, the project's shared `…mesh_start` (actor `project-client`).
   */
  agent?: string;
  /**
   * Publish through the agent edge (`<prefix>.edge.…`, relayed by the ledger): what an agent's own
   * credentials allow (they allow nothing JetStream reads). `BatonAgent.meshPublisher()` sets it as
   * the client does; default false (an admin or development connection publishes directly).
   */
  edge?: boolean;
  /** How a publish that times out is sent again (`BatonAgent.meshPublisher()` sets the client's; default 3 attempts of 5 s). */
  retry?: Partial<PublishRetry>;
}

/** The message ids the mesh publishers of this process sent, when a publisher brings no memory of its own. */
const processSent = new SentMessageIds();

const encoder = new TextEncoder();

/** The AgentResult a mesh turn travels as (`workflow_run_id` = the mesh run, `body` = the text). Pure; validates. */
export function meshTurnResult(input: MeshTurnInput): AgentResult {
  const candidate = {
    result_id: input.result_id,
    run_id: input.run_id ?? input.result_id,
    project: input.project,
    workflow_run_id: input.mesh_run_id,
    agent: input.agent,
    body: input.text,
    handoff_tool_calls: input.handoff_tool_calls ?? [],
    ...(input.handoff_id !== undefined ? { handoff_id: input.handoff_id } : {}),
    ...(input.claim_id !== undefined ? { claim_id: input.claim_id } : {}),
    ...(input.evidence !== undefined ? { evidence: input.evidence } : {}),
    ...(input.stop !== undefined ? { stop: input.stop } : {}),
    ...(input.tried !== undefined ? { tried: input.tried } : {}),
    ...(input.pending_tool_call != null ? { pending_tool_call: input.pending_tool_call } : {}),
    produced_at: input.produced_at ?? new Date().toISOString(),
  };
  const parsed = AgentResultSchema.safeParse(candidate);
  if (!parsed.success) throw new InvalidInputError('mesh turn', rejectionFromZod(parsed.error));
  return parsed.data;
}

/**
 * Report an agent's mesh turn: publish it (an AgentResult, see {@link meshTurnResult}) to
 * `<prefix>.in.<project>.mesh_result.<agent>` with `Nats-Msg-Id = mesh_result:<project>:<workflow_run_id>/<result_id>`,
 * and wait for the stream's ack. Safe to retry with the same input: the stream stores it once
 * within its duplicate window (`duplicate: true`), and the mesh applies a result id once.
 * @throws InvalidInputError (nothing sent); DuplicateMessageError when the stream holds a turn with
 *   this id that this process did not publish (nothing stored); the mapped publish error (PublishTimeout: retry).
 */
export async function publishMeshResult(publisher: MeshPublisher, input: MeshTurnInput): Promise<PublishReceipt> {
  const result = meshTurnResult(input);
  return publish(
    publisher,
    Subjects.meshResult(publisher.prefix, result.project, result.agent),
    result,
    MsgIds.meshResult(result.project, result.workflow_run_id, result.result_id),
  );
}

/**
 * Start a mesh run: publish a MeshStartRequest to `<prefix>.in.<project>.mesh_start.<agent>` when the
 * publisher names its agent (else the shared `<prefix>.in.<project>.mesh_start`) with
 * `Nats-Msg-Id = mesh_start:<project>:<mesh_run_id>` (the router starts it once, however often it is sent).
 * @throws InvalidInputError (nothing sent); DuplicateMessageError (a start of this mesh run this
 *   process did not publish); the mapped publish error.
 */
export async function startMesh(publisher: MeshPublisher, request: MeshStartRequest): Promise<PublishReceipt> {
  const parsed = MeshStartRequestSchema.safeParse(request);
  if (!parsed.success) throw new InvalidInputError('mesh start', rejectionFromZod(parsed.error));
  return publish(
    publisher,
    publisher.agent !== undefined
      ? Subjects.agentMeshStart(publisher.prefix, parsed.data.project, publisher.agent)
      : Subjects.meshStart(publisher.prefix, parsed.data.project),
    parsed.data,
    MsgIds.meshStart(parsed.data.project, parsed.data.mesh_run_id),
  );
}

function publish(publisher: MeshPublisher, subject: string, body: object, msgId: string): Promise<PublishReceipt> {
  const to = publisher.edge === true ? edgeSubjectOf(publisher.prefix, subject) : subject;
  return publishOnce(
    publisher.js,
    publisher.sent ?? processSent,
    to,
    encoder.encode(JSON.stringify(body)),
    msgId,
    undefined,
    messageIdentity(body),
    publishRetryOf(publisher.retry),
    publisher.edge === true,
  );
}
