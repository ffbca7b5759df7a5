import { grantedTargets, handoffToolName, meshParticipants, validateMesh, type MeshDefinition, type MeshDiagnostic } from '@baton/contracts';

/** A mesh that passed its build checks, with each agent's tool table. */
export interface CompiledMesh {
  definition: MeshDefinition;
  participants: readonly string[];
  /** Per agent: its `handoff_to_<target>` tool names → target agent (only granted targets). */
  tools: Readonly<Record<string, Readonly<Record<string, string>>>>;
}

export type MeshBuild = { ok: true; mesh: CompiledMesh } | { ok: false; diagnostics: MeshDiagnostic[] };

/**
 * Build a mesh against the project's agents: run {@link validateMesh} (unknown agents, targets,
 * entry or output agents; self-handoffs; colliding sanitized tool names) and, when it passes,
 * compute each agent's granted tool table. Pure.
 */
export function buildMesh(definition: MeshDefinition, agents: readonly string[]): MeshBuild {
  const diagnostics = validateMesh(definition, agents);
  if (diagnostics.length > 0) return { ok: false, diagnostics };
  return { ok: true, mesh: { definition, participants: meshParticipants(definition), tools: toolTables(definition) } };
}

/** Each agent's granted tools (tool name → target), from a mesh that passed its checks. */
export function toolTables(definition: MeshDefinition): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const agent of meshParticipants(definition)) {
    const table: Record<string, string> = {};
    for (const target of grantedTargets(definition, agent)) table[handoffToolName(target)] = target;
    out[agent] = table;
  }
  return out;
}

/** What one handoff tool call means for the agent that made it. */
export type HandoffCallResolution =
  | { kind: 'handoff'; target: string }
  | { kind: 'ignored'; reason: 'unknown_tool'; target: null }
  | { kind: 'ignored'; reason: 'not_granted'; target: string };

/**
 * Resolve a tool call of `agent` against the mesh: a granted `handoff_to_<target>` is a handoff;
 * a tool that names no mesh participant is `unknown_tool`; one that names a participant this agent
 * may not hand off to (itself included) is `not_granted`. Enforced here, per agent, whatever tools
 * the agent was actually given.
 */
export function resolveHandoffCall(definition: MeshDefinition, agent: string, tool: string): HandoffCallResolution {
  const granted = grantedTargets(definition, agent);
  const target = granted.find((candidate) => candidate !== agent && handoffToolName(candidate) === tool);
  if (target !== undefined) return { kind: 'handoff', target };
  const named = meshParticipants(definition).find((candidate) => handoffToolName(candidate) === tool);
  return named === undefined ? { kind: 'ignored', reason: 'unknown_tool', target: null } : { kind: 'ignored', reason: 'not_granted', target: named };
}
