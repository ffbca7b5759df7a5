import { AgentNameSchema, ProjectIdSchema } from './common';
import { AggregateKindSchema, type AggregateKind } from './envelope';
import { ledgerCommandSubject, parseLedgerCommandSubject, type LedgerCommandAddress } from './principal';
import { isSubjectToken } from './subject-tokens';

/*
 * Every NATS subject Baton uses, in one typed table that both builds and parses them. Aggregates
 * have one subject per instance so appends can use `Nats-Expected-Last-Subject-Sequence`.
 *
 * Every subject starts with the deployment's prefix, one token (`BATON_PREFIX` holds no dots), then
 * an area: `ev` (events), `in` (the inbox stream), `cmd` (request/reply commands), `notice` and
 * `dlq` (dead letters). Each entry of {@link SubjectTable} has a name, its
 * pattern, `build` (checked: throws {@link SubjectTokenError} for a token its parse would refuse),
 * `parse` (typed tokens, or null for any other shape, another prefix, a wildcard or an extra
 * token) and `format` (unchecked: fills the pattern, `*` for every token left out, which is how
 * subscription filters are made). {@link parseSubject} finds the entry of any subject.
 */

export { isPlainSubject, isSubjectToken, isUnder } from './subject-tokens';

/** The area of a subject: the token after the prefix. */
export type SubjectArea = 'ev' | 'in' | 'cmd' | 'notice' | 'dlq';

/** A token `build` refused: the subject would not parse back (another shape, a wildcard, a bad project key...). */
export class SubjectTokenError extends Error {
  constructor(
    readonly entry: string,
    readonly token: string,
    readonly value: unknown,
  ) {
    super(`${entry} subject: ${JSON.stringify(value)} is not a valid ${token} token`);
    this.name = 'SubjectTokenError';
  }
}

/** The commands the router serves over request/reply (`<prefix>.cmd.router.<project>.<command>`). */
export const RouterCommandNames = ['publish_definition'] as const;
export type RouterCommandName = (typeof RouterCommandNames)[number];

/** The message kinds of the inbox (`<prefix>.in.<project>.<kind>[.<agent>]`) that some consumer reads. */
export const InboxKinds = ['start', 'result', 'message', 'answer', 'stop', 'offer', 'mesh_start', 'mesh_result', 'mesh_answer'] as const;
export type InboxKind = (typeof InboxKinds)[number];

/** What each variable token may hold. */
const TokenRules = {
  /** A project key (`ProjectIdSchema`: it is checked against every body's `project`). */
  project: (token: string) => ProjectIdSchema.safeParse(token).success,
  /** An agent name (`AgentNameSchema`). */
  agent: (token: string) => AgentNameSchema.safeParse(token).success,
  /** An aggregate kind of the event catalogue. */
  kind: (token: string) => AggregateKindSchema.safeParse(token).success,
  /** An aggregate id, a dead letter source: any subject token. */
  token: isSubjectToken,
  routerCommand: (token: string) => (RouterCommandNames as readonly string[]).includes(token),
} as const;

interface Slot {
  readonly slot: string;
  readonly rule: (token: string) => boolean;
}

const slot = (name: string, rule: (token: string) => boolean): Slot => ({ slot: name, rule });

/** The string-valued tokens of an entry (what `format` may fill in). */
type StringTokens<T> = { [K in keyof T as T[K] extends string ? K : never]?: string };

/** One kind of subject: how to build it, parse it and subscribe to it. */
export interface SubjectEntry<N extends string, T extends object> {
  readonly name: N;
  readonly area: SubjectArea;
  /** The inbox kind of an `in` subject (`start`, `result`, ...). */
  readonly inboxKind?: InboxKind;
  /** The pattern, e.g. `{prefix}.in.{project}.result.{agent}`. */
  readonly pattern: string;
  /** The subject for these tokens; throws {@link SubjectTokenError} for a token `parse` would refuse. */
  build(prefix: string, tokens: T): string;
  /** The tokens of `subject`, or null when it is not a subject of this entry under `prefix`. */
  parse(prefix: string, subject: string): T | null;
  /**
   * The pattern filled in WITHOUT checks: every token left out is `*`, so `format(prefix)` is the
   * subscription filter of every subject of the entry. What the `Subjects.*` helpers return.
   */
  format(prefix: string, tokens?: StringTokens<T>): string;
  /** @internal Match the tokens after the prefix (already split). */
  match(rest: readonly string[], subject: string, prefix: string): T | null;
}

function templateEntry<N extends string, T extends Record<string, string>>(
  name: N,
  area: SubjectArea,
  parts: ReadonlyArray<string | Slot>,
  inboxKind?: InboxKind,
): SubjectEntry<N, T> {
  const pattern = ['{prefix}', ...parts.map((p) => (typeof p === 'string' ? p : `{${p.slot}}`))].join('.');
  const match = (rest: readonly string[]): T | null => {
    if (rest.length !== parts.length) return null;
    const out: Record<string, string> = {};
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      const token = rest[i]!;
      if (typeof part === 'string') {
        if (token !== part) return null;
      } else {
        if (!part.rule(token)) return null;
        out[part.slot] = token;
      }
    }
    return out as T;
  };
  const fill = (prefix: string, value: (part: Slot) => string) => [prefix, ...parts.map((part) => (typeof part === 'string' ? part : value(part)))].join('.');
  return {
    name,
    area,
    ...(inboxKind !== undefined ? { inboxKind } : {}),
    pattern,
    build(prefix, tokens) {
      if (!isSubjectToken(prefix)) throw new SubjectTokenError(name, 'prefix', prefix);
      return fill(prefix, (part) => {
        const value = (tokens as Record<string, unknown>)[part.slot];
        if (typeof value !== 'string' || !part.rule(value)) throw new SubjectTokenError(name, part.slot, value);
        return value;
      });
    },
    parse(prefix, subject) {
      const tokens = subject.split('.');
      return tokens[0] === prefix && isSubjectToken(prefix) ? match(tokens.slice(1)) : null;
    },
    format(prefix, tokens = {}) {
      return fill(prefix, (part) => (tokens as Record<string, string | undefined>)[part.slot] ?? '*');
    },
    match,
  };
}

/** A ledger command subject, parsed (`principal.ts` owns this shape; see `ledgerCommandSubject`). */
export type LedgerCommandTokens = LedgerCommandAddress;

const ledgerCommandEntry: SubjectEntry<'ledgerCommand', LedgerCommandTokens> = {
  name: 'ledgerCommand',
  area: 'cmd',
  pattern: '{prefix}.cmd.ledger.{project}.{kind}.{name}.{command}',
  build(prefix, tokens) {
    const subject = ledgerCommandSubject(prefix, tokens.project, tokens.principal, tokens.command);
    const back = ledgerCommandEntry.parse(prefix, subject);
    if (back === null) {
      // Name the first token that does not parse back.
      const bad = !isSubjectToken(prefix)
        ? ['prefix', prefix]
        : !TokenRules.project(tokens.project)
          ? ['project', tokens.project]
          : !isSubjectToken(tokens.command)
            ? ['command', tokens.command]
            : ['principal', tokens.principal];
      throw new SubjectTokenError('ledgerCommand', String(bad[0]), bad[1]);
    }
    return subject;
  },
  parse(prefix, subject) {
    if (!isSubjectToken(prefix)) return null;
    const address = parseLedgerCommandSubject(prefix, subject);
    return address !== null && isSubjectToken(address.command) ? address : null;
  },
  format(prefix, tokens = {}) {
    const t = tokens as { project?: string; command?: string };
    if (t.project === undefined && t.command === undefined) return `${prefix}.cmd.ledger.>`;
    return `${prefix}.cmd.ledger.${t.project ?? '*'}.*.*.${t.command ?? '*'}`;
  },
  match(_rest, subject, prefix) {
    return ledgerCommandEntry.parse(prefix, subject);
  },
};

const { project, agent } = { project: slot('project', TokenRules.project), agent: slot('agent', TokenRules.agent) };
type P = { project: string };
type PA = { project: string; agent: string };

/** Every subject Baton uses. */
export const SubjectTable = {
  /** An aggregate's events: `<prefix>.ev.<project>.<kind>.<id>` (stream `<PREFIX>_EVENTS`; one writer per kind). */
  event: templateEntry<'event', { project: string; kind: AggregateKind; id: string }>('event', 'ev', [
    'ev',
    project,
    slot('kind', TokenRules.kind),
    slot('id', TokenRules.token),
  ]),
  /** Run starts (StartRunRequest) on the project's shared subject: the publisher is any client of the project (actor `project-client`). */
  runStart: templateEntry<'runStart', P>('runStart', 'in', ['in', project, 'start'], 'start'),
  /** Run starts (StartRunRequest) published by one agent: only that agent may, and the run's start records it as the actor. */
  agentRunStart: templateEntry<'agentRunStart', PA>('agentRunStart', 'in', ['in', project, 'start', agent], 'start'),
  /** Agent results published by agent microservices. */
  agentResult: templateEntry<'agentResult', PA>('agentResult', 'in', ['in', project, 'result', agent], 'result'),
  /** Customer turns of a conversation run (SessionMessage; seed 001). */
  sessionMessage: templateEntry<'sessionMessage', P>('sessionMessage', 'in', ['in', project, 'message'], 'message'),
  /** Customer turns relayed by one agent (only that agent may publish them; its name is recorded as `relayed_by`). */
  agentSessionMessage: templateEntry<'agentSessionMessage', PA>('agentSessionMessage', 'in', ['in', project, 'message', agent], 'message'),
  /** Operator answers to stop packets and holds (the notifier). */
  operatorAnswer: templateEntry<'operatorAnswer', P>('operatorAnswer', 'in', ['in', project, 'answer'], 'answer'),
  /** Requests to stop a run from outside (StopRunRequest; the watchdog). */
  stopRequest: templateEntry<'stopRequest', P>('stopRequest', 'in', ['in', project, 'stop'], 'stop'),
  /** Handoffs offered to an agent (the HandoffRecord; the agent's SDK pulls its offers durable). */
  offer: templateEntry<'offer', PA>('offer', 'in', ['in', project, 'offer', agent], 'offer'),
  /** Mesh starts (MeshStartRequest) on the project's shared subject (actor `project-client`). */
  meshStart: templateEntry<'meshStart', P>('meshStart', 'in', ['in', project, 'mesh_start'], 'mesh_start'),
  /** Mesh starts (MeshStartRequest) published by one agent: only that agent may, and the mesh's start records it as the actor. */
  agentMeshStart: templateEntry<'agentMeshStart', PA>('agentMeshStart', 'in', ['in', project, 'mesh_start', agent], 'mesh_start'),
  /** Mesh turns: an AgentResult whose workflow_run_id is the mesh run id. */
  meshResult: templateEntry<'meshResult', PA>('meshResult', 'in', ['in', project, 'mesh_result', agent], 'mesh_result'),
  /** Operator answers to a mesh's stop packet (MeshAnswerRequest). */
  meshAnswer: templateEntry<'meshAnswer', P>('meshAnswer', 'in', ['in', project, 'mesh_answer'], 'mesh_answer'),
  /**
   * Ledger commands: `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`, the subject naming
   * the caller (`ledgerCommandSubject` / `parseLedgerCommandSubject` in principal.ts). The command
   * token is any token: the ledger answers `unknown_command` for one it does not serve.
   */
  ledgerCommand: ledgerCommandEntry,
  /** The router's request/reply commands (publish_definition). */
  routerCommand: templateEntry<'routerCommand', { project: string; command: RouterCommandName }>('routerCommand', 'cmd', [
    'cmd',
    'router',
    project,
    slot('command', TokenRules.routerCommand),
  ]),
  /** Human action notices (core NATS; the notifier). */
  notice: templateEntry<'notice', P>('notice', 'notice', ['notice', project]),
  /** Dead letters (`<source>` as `dlqSourceToken` makes it; `_redriven` holds the admin's redrive markers). */
  deadLetter: templateEntry<'deadLetter', { source: string }>('deadLetter', 'dlq', ['dlq', slot('source', TokenRules.token)]),
} as const;

export type SubjectTable = typeof SubjectTable;
export type SubjectName = keyof SubjectTable;
/** The tokens of one entry. */
export type SubjectTokens<N extends SubjectName> = SubjectTable[N] extends SubjectEntry<N, infer T> ? T : never;

/** A subject the table knows: its entry's name and tokens. */
export type KnownSubject = { [N in SubjectName]: { name: N } & SubjectTokens<N> }[SubjectName];

/**
 * A subject under the prefix that no entry describes, e.g. `<prefix>.in.<project>.bogus`: an inbox
 * message no consumer reads. `area` is the token after the prefix.
 */
export interface UnknownSubject {
  name: 'unknown';
  area: string;
}

export type ParsedSubject = KnownSubject | UnknownSubject;

const entriesByArea = new Map<string, SubjectEntry<SubjectName, object>[]>();
for (const entry of Object.values(SubjectTable) as SubjectEntry<SubjectName, object>[]) {
  entriesByArea.set(entry.area, [...(entriesByArea.get(entry.area) ?? []), entry]);
}

/**
 * The project a Baton subject names, or undefined (another prefix, no project, a bad project key):
 * the table's `project` token, else — for a subject the table does not describe (an agent edge
 * subject `<prefix>.edge.<project>.…`, an inbox kind nobody reads, a malformed command) — the token
 * where its area puts the project (`in`, `ev`, `edge`, `notice`: the second after the prefix;
 * `cmd`: the third).
 */
const PROJECT_TOKEN_BY_AREA: ReadonlyMap<string, number> = new Map([
  ['in', 2],
  ['ev', 2],
  ['edge', 2],
  ['notice', 2],
  ['cmd', 3],
]);

export function projectOfSubject(prefix: string, subject: string): string | undefined {
  const parsed = parseSubject(prefix, subject);
  if (parsed === null) return undefined;
  if ('project' in parsed && typeof parsed.project === 'string') return parsed.project;
  const at = PROJECT_TOKEN_BY_AREA.get(parsed.name === 'unknown' ? parsed.area : SubjectTable[parsed.name].area);
  const token = at === undefined ? undefined : subject.split('.')[at];
  return token !== undefined && ProjectIdSchema.safeParse(token).success ? token : undefined;
}

/**
 * Which subject `subject` is: `{ name, ...tokens }` for a subject of the table, `{ name: 'unknown',
 * area }` for one under the prefix that no entry describes (another shape, an inbox kind nobody
 * reads, a bad project key), null when it is not under `prefix` or holds an empty token or a
 * wildcard.
 */
export function parseSubject(prefix: string, subject: string): ParsedSubject | null {
  const tokens = subject.split('.');
  if (tokens[0] !== prefix || tokens.length < 2 || !tokens.every(isSubjectToken)) return null;
  const rest = tokens.slice(1);
  for (const entry of entriesByArea.get(rest[0]!) ?? []) {
    const parsed = entry.match(rest, subject, prefix);
    if (parsed !== null) return { name: entry.name, ...parsed } as KnownSubject;
  }
  return { name: 'unknown', area: rest[0]! };
}

/**
 * The subject builders the code has always used; they fill the table's patterns without checks
 * (a `*` token gives a subscription filter). For a checked subject use `SubjectTable.<name>.build`.
 */
export const Subjects = {
  /** Prefix of every event subject; streams bind `<prefix>.ev.>`. */
  events: (prefix: string) => `${prefix}.ev.>`,
  aggregate: (prefix: string, project: string, kind: string, id: string) => SubjectTable.event.format(prefix, { project, kind, id }),
  aggregateKind: (prefix: string, kind: string) => SubjectTable.event.format(prefix, { kind }),
  /** Agent results published by agent microservices. */
  agentResult: (prefix: string, project: string, agent: string) => SubjectTable.agentResult.format(prefix, { project, agent }),
  agentResults: (prefix: string) => SubjectTable.agentResult.format(prefix),
  /** Run starts (StartRunRequest) on the project's shared subject. */
  runStart: (prefix: string, project: string) => SubjectTable.runStart.format(prefix, { project }),
  /** Run starts published by one agent (`<prefix>.in.<project>.start.<agent>`); `format(prefix)` of every one is the filter. */
  agentRunStart: (prefix: string, project: string, agent: string) => SubjectTable.agentRunStart.format(prefix, { project, agent }),
  agentRunStarts: (prefix: string) => SubjectTable.agentRunStart.format(prefix),
  /** Customer turns of a conversation run (SessionMessage; seed 001). */
  sessionMessage: (prefix: string, project: string) => SubjectTable.sessionMessage.format(prefix, { project }),
  sessionMessages: (prefix: string) => SubjectTable.sessionMessage.format(prefix),
  /** Customer turns relayed by one agent (`<prefix>.in.<project>.message.<agent>`). */
  agentSessionMessage: (prefix: string, project: string, agent: string) => SubjectTable.agentSessionMessage.format(prefix, { project, agent }),
  agentSessionMessages: (prefix: string) => SubjectTable.agentSessionMessage.format(prefix),
  /** Requests to stop a run from outside (StopRunRequest; the watchdog). */
  stopRequest: (prefix: string, project: string) => SubjectTable.stopRequest.format(prefix, { project }),
  /** Handoffs offered to an agent (the HandoffRecord; agents' SDKs consume these durably). */
  offer: (prefix: string, project: string, agent: string) => SubjectTable.offer.format(prefix, { project, agent }),
  /** The router's request/reply commands (e.g. publish_definition). */
  routerCommand: (prefix: string, project: string, command: RouterCommandName) => SubjectTable.routerCommand.format(prefix, { project, command }),
  /** Operator answers to stop packets and handbacks. */
  operatorAnswer: (prefix: string, project: string) => SubjectTable.operatorAnswer.format(prefix, { project }),
  operatorAnswers: (prefix: string) => SubjectTable.operatorAnswer.format(prefix),
  /**
   * Every ledger request/reply command (the ledger's subscription). One command is
   * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`: build it with `ledgerCommandSubject`
   * (principal.ts), which names the caller so the server's permissions pin who may send it.
   */
  ledgerCommands: (prefix: string) => SubjectTable.ledgerCommand.format(prefix),
  /** Every agent edge subject (`<prefix>.edge.>`, relayed by the ledger; `edge.ts`). */
  agentEdge: (prefix: string) => `${prefix}.edge.>`,
  /** Human action notices. */
  notice: (prefix: string, project: string) => SubjectTable.notice.format(prefix, { project }),
  /** Mesh starts (MeshStartRequest; JetStream into the inbox). */
  meshStart: (prefix: string, project: string) => SubjectTable.meshStart.format(prefix, { project }),
  meshStarts: (prefix: string) => SubjectTable.meshStart.format(prefix),
  /** Mesh starts published by one agent (`<prefix>.in.<project>.mesh_start.<agent>`). */
  agentMeshStart: (prefix: string, project: string, agent: string) => SubjectTable.agentMeshStart.format(prefix, { project, agent }),
  agentMeshStarts: (prefix: string) => SubjectTable.agentMeshStart.format(prefix),
  /** Mesh turns: an AgentResult whose workflow_run_id is the mesh run id (JetStream into the inbox). */
  meshResult: (prefix: string, project: string, agent: string) => SubjectTable.meshResult.format(prefix, { project, agent }),
  meshResults: (prefix: string) => SubjectTable.meshResult.format(prefix),
  /** Operator answers to a mesh's stop packet (MeshAnswerRequest; JetStream into the inbox). */
  meshAnswer: (prefix: string, project: string) => SubjectTable.meshAnswer.format(prefix, { project }),
  meshAnswers: (prefix: string) => SubjectTable.meshAnswer.format(prefix),
  /** Dead letters. */
  deadLetter: (prefix: string, source: string) => SubjectTable.deadLetter.format(prefix, { source }),
  deadLetters: (prefix: string) => `${prefix}.dlq.>`,
} as const;
