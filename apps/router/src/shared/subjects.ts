import { isSubjectToken } from '@baton/contracts';

/**
 * The router's patterns as written in its decorators (`{prefix}` is substituted by the transport).
 * `Subjects` in `@baton/contracts` has no builder for run starts or router commands yet; the two
 * builders below are the only subject strings the router makes itself (see the report to the lead).
 */
export const RouterPatterns = {
  publishDefinition: '{prefix}.cmd.router.*.publish_definition',
  runStart: '{prefix}.in.*.start',
  agentResult: '{prefix}.in.*.result.*',
  operatorAnswer: '{prefix}.in.*.answer',
  stopRequest: '{prefix}.in.*.stop',
  /** Customer turns of conversation runs (SessionMessage; seed 001). */
  sessionMessage: '{prefix}.in.*.message',
  runEvents: '{prefix}.ev.*.run.*',
  /** Handoff events (the ledger's aggregate, read-only here): deadlines of returnable children. */
  handoffEvents: '{prefix}.ev.*.handoff.*',
} as const;

export const RouterSubjects = {
  /** Where a run start is published (JetStream, the inbox stream). */
  runStart: (prefix: string, project: string) => `${prefix}.in.${project}.start`,
  /** The router's request/reply subject for publishing a project definition (core NATS). */
  publishDefinition: (prefix: string, project: string) => `${prefix}.cmd.router.${project}.publish_definition`,
} as const;

/**
 * The project (and, for results, agent) tokens of an inbox or command subject:
 * `<prefix>.in.<project>.<kind>[.<agent>]` or `<prefix>.cmd.router.<project>.<command>`. The
 * prefix is one token (the configuration forbids dots in it). Returns null for any other shape.
 */
export function subjectTokens(subject: string): { project: string; agent: string | null } | null {
  const tokens = subject.split('.');
  if (tokens[1] === 'in' && tokens.length >= 4) {
    const project = tokens[2] ?? '';
    const agent = tokens[3] === 'result' && tokens.length === 5 ? (tokens[4] ?? null) : null;
    return isSubjectToken(project) ? { project, agent } : null;
  }
  if (tokens[1] === 'cmd' && tokens[2] === 'router' && tokens.length === 5) {
    const project = tokens[3] ?? '';
    return isSubjectToken(project) ? { project, agent: null } : null;
  }
  return null;
}
