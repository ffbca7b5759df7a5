import { parseSubject } from '@baton/contracts';

/** The router's mesh patterns as written in its decorators (`{prefix}` is substituted by the transport). */
export const MeshPatterns = {
  meshStart: '{prefix}.in.*.mesh_start',
  /** Mesh starts naming their publisher (`…mesh_start.<agent>`): the start's actor is that agent. */
  agentMeshStart: '{prefix}.in.*.mesh_start.*',
  meshResult: '{prefix}.in.*.mesh_result.*',
  meshEvents: '{prefix}.ev.*.mesh.*',
  meshAnswer: '{prefix}.in.*.mesh_answer',
} as const;

/** The project (and, for turns, agent) of `<prefix>.in.<project>.mesh_start[.<agent>]|mesh_answer|mesh_result.<agent>` (the subject table); null for any other subject. */
export function meshSubjectTokens(prefix: string, subject: string): { project: string; agent: string | null } | null {
  const parsed = parseSubject(prefix, subject);
  switch (parsed?.name) {
    case 'meshResult':
      return { project: parsed.project, agent: parsed.agent };
    case 'meshStart':
    case 'agentMeshStart':
    case 'meshAnswer':
      return { project: parsed.project, agent: null };
    default:
      return null;
  }
}
