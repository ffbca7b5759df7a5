import { isSubjectToken } from '@baton/contracts';

/** The router's mesh patterns as written in its decorators (`{prefix}` is substituted by the transport). */
export const MeshPatterns = {
  meshStart: '{prefix}.in.*.mesh_start',
  meshResult: '{prefix}.in.*.mesh_result.*',
  meshEvents: '{prefix}.ev.*.mesh.*',
  meshAnswer: '{prefix}.in.*.mesh_answer',
} as const;

/** The project (and, for turns, agent) of `<prefix>.in.<project>.mesh_start|mesh_answer|mesh_result.<agent>`; null for any other shape. */
export function meshSubjectTokens(subject: string): { project: string; agent: string | null } | null {
  const tokens = subject.split('.');
  if (tokens[1] !== 'in' || tokens.length < 4) return null;
  const project = tokens[2] ?? '';
  if (!isSubjectToken(project)) return null;
  if ((tokens[3] === 'mesh_start' || tokens[3] === 'mesh_answer') && tokens.length === 4) return { project, agent: null };
  if (tokens[3] === 'mesh_result' && tokens.length === 5 && isSubjectToken(tokens[4] ?? '')) return { project, agent: tokens[4]! };
  return null;
}
