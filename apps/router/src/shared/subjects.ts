import { parseSubject, Subjects } from '@baton/contracts';
import { START_CLIENT_ACTOR } from './ids';

/**
 * The router's patterns as written in its decorators (`{prefix}` is substituted by the transport).
 * They stay literal strings: the durable consumers are named after them (`durableNameFor`).
 */
export const RouterPatterns = {
  publishDefinition: '{prefix}.cmd.router.*.publish_definition',
  runStart: '{prefix}.in.*.start',
  /** Run starts naming their publisher (`…start.<agent>`): the start's actor is that agent. */
  agentRunStart: '{prefix}.in.*.start.*',
  agentResult: '{prefix}.in.*.result.*',
  operatorAnswer: '{prefix}.in.*.answer',
  stopRequest: '{prefix}.in.*.stop',
  /** Customer turns of conversation runs (SessionMessage; seed 001). */
  sessionMessage: '{prefix}.in.*.message',
  /** Customer turns relayed by one agent (`…message.<agent>`): recorded with `relayed_by`. */
  agentSessionMessage: '{prefix}.in.*.message.*',
  runEvents: '{prefix}.ev.*.run.*',
  /** Handoff events (the ledger's aggregate, read-only here): deadlines of returnable children. */
  handoffEvents: '{prefix}.ev.*.handoff.*',
} as const;

export const RouterSubjects = {
  /** Where a run start is published (JetStream, the inbox stream). */
  runStart: (prefix: string, project: string) => Subjects.runStart(prefix, project),
  /** The router's request/reply subject for publishing a project definition (core NATS). */
  publishDefinition: (prefix: string, project: string) => Subjects.routerCommand(prefix, project, 'publish_definition'),
} as const;

/**
 * The project (and, for results, agent) tokens of a subject the router consumes as an inbox
 * message or a command: `<prefix>.in.<project>.start[.<agent>]|message|answer|stop|result.<agent>`
 * or `<prefix>.cmd.router.<project>.<command>`, read with the subject table (`parseSubject`). Null
 * for any other subject, another prefix, or a project that is not a project key. `agent` is the
 * agent a result's body must name; a start's publisher is not one (its body names no agent: see
 * {@link startActorOf}).
 */
export function subjectTokens(prefix: string, subject: string): { project: string; agent: string | null } | null {
  const parsed = parseSubject(prefix, subject);
  switch (parsed?.name) {
    case 'agentResult':
      return { project: parsed.project, agent: parsed.agent };
    case 'runStart':
    case 'agentRunStart':
    case 'sessionMessage':
    case 'agentSessionMessage':
    case 'operatorAnswer':
    case 'stopRequest':
    case 'routerCommand':
      return { project: parsed.project, agent: null };
    default:
      return null;
  }
}

/**
 * The agent a client subject names as its publisher — `…start.<agent>`, `…mesh_start.<agent>`,
 * `…message.<agent>` (its credentials allow that subject to that agent only) — or null for the
 * project's shared `…start`, `…mesh_start`, `…message`, which prove only a client of the project.
 */
export function publishingAgentOf(prefix: string, subject: string): string | null {
  const parsed = parseSubject(prefix, subject);
  switch (parsed?.name) {
    case 'agentRunStart':
    case 'agentMeshStart':
    case 'agentSessionMessage':
      return parsed.agent;
    default:
      return null;
  }
}

/**
 * The actor of what a run or mesh start causes, from its subject alone: the agent a
 * `…start.<agent>` / `…mesh_start.<agent>` subject names, else {@link START_CLIENT_ACTOR} — the
 * shared `…start` / `…mesh_start` subject proves only a client of the project.
 */
export function startActorOf(prefix: string, subject: string): string {
  return publishingAgentOf(prefix, subject) ?? START_CLIENT_ACTOR;
}
