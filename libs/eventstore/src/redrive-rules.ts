import { RejectionCode, SubjectTable, Subjects, foreignMsgId, legacyOfferDurableName, offerDurableName } from '@baton/contracts';
import { DeadLetterReason, dlqSourceToken, isCoreRequestStream, type DeadLetterInput } from './dead-letter';
import { DlqSources, type DlqSource } from './dlq-sources';
import { durableNameFor, subjectMatches } from './subject-patterns';
import { batonStreamNames } from './topology';

/**
 * Where `baton dlq redrive` may republish a dead letter: only to an inbox subject that the
 * consumer which dead-lettered it (its recorded source) consumes. The table is derived from the
 * consumers Baton declares on `<PREFIX>_INBOX`:
 *
 * - the router's inbox consumers, one durable per `@EventPattern` (named by the transport with
 *   `durableNameFor('router', pattern)`), each dead-lettering under its readable source
 *   (`router-results`...; `DlqSources`); letters stored before the readable names carry the
 *   durable name, which is recognised too (`apps/router/src/shared/subjects.ts`,
 *   `apps/router/src/meshes/mesh-subjects.ts`; `apps/router/src/shared/redrive-table.spec.ts`
 *   fails when they drift apart);
 * - each agent's offers durable, `offerDurableName(project, agent)` on
 *   `<prefix>.in.<project>.offer.<agent>` (the SDK).
 *
 * Never a redrive target, whoever the letter says dead-lettered it: events (`<prefix>.ev.>`: an
 * aggregate has one writer, a republished event would be a forged one), operator answers
 * (`<prefix>.in.*.answer`, `<prefix>.in.*.mesh_answer`: an answer is a person's act), and core
 * NATS requests (`<prefix>.cmd.>`, or a letter whose stream is `core`: no stream stores them, the
 * caller got its refusal and sends again). Every other consumer (the event reactors, projections,
 * webhooks) reads the events stream, so its letters are skipped too.
 *
 * Nor, unless the caller asks for it (`includeRefused`), a letter whose reason says the message
 * itself was refused ({@link REFUSED_MESSAGE_REASONS}: not UTF-8, not JSON, not its schema, too
 * large, another project or agent than its subject, a run id taken…): the same bytes get the same
 * refusal, so a redrive would only add another copy of the letter. Its sender publishes a
 * corrected message.
 *
 * Nor a `refusals_suppressed` letter (`summary_letter`): it holds no message, only how many of a
 * sender's refusals had no letter of their own. These rules also decide which refusals may be so
 * summed up ({@link redrivableLetter}): never one whose own letter a redrive would republish.
 */

/** A service's inbox consumer whose dead letters may be redriven to the subjects it consumes. */
export interface InboxConsumerDeclaration {
  service: string;
  /** The pattern as written in the service's decorator (`{prefix}` placeholder). */
  pattern: string;
  /** The readable dead-letter source the consumer writes its letters under. */
  source: DlqSource;
}

/** The router's inbox consumers (the patterns of its `@EventPattern`s on `<prefix>.in.>`, answers excepted). */
export const ROUTER_INBOX_CONSUMERS: readonly InboxConsumerDeclaration[] = [
  { service: 'router', pattern: '{prefix}.in.*.start', source: DlqSources.routerStarts },
  { service: 'router', pattern: '{prefix}.in.*.start.*', source: DlqSources.routerAgentStarts },
  { service: 'router', pattern: '{prefix}.in.*.result.*', source: DlqSources.routerResults },
  { service: 'router', pattern: '{prefix}.in.*.message', source: DlqSources.routerMessages },
  { service: 'router', pattern: '{prefix}.in.*.message.*', source: DlqSources.routerAgentMessages },
  { service: 'router', pattern: '{prefix}.in.*.stop', source: DlqSources.routerStops },
  { service: 'router', pattern: '{prefix}.in.*.mesh_start', source: DlqSources.routerMeshStarts },
  { service: 'router', pattern: '{prefix}.in.*.mesh_start.*', source: DlqSources.routerAgentMeshStarts },
  { service: 'router', pattern: '{prefix}.in.*.mesh_result.*', source: DlqSources.routerMeshTurns },
];

/** Why a dead letter was not redriven. */
export const RedriveSkip = {
  /** A redrive marker (written by redrive, verified) names this letter. */
  alreadyRedriven: 'already_redriven',
  /** The letter names no original subject. */
  noSubject: 'no_subject',
  /** The letter's source header and its DLQ subject token disagree. */
  sourceMismatch: 'source_mismatch',
  /** A core NATS request (`<prefix>.cmd.>`, stream `core`): no stream stores it. */
  coreRequest: 'core_request',
  /**
   * A `refusals_suppressed` letter: it stands for refused messages that got no letter of their
   * own, and holds none of them (its bytes are the summary). Its detail says where they are: in the
   * stream that stored them (its body's `stored` names the sequences), or nowhere (core messages,
   * whose senders were answered).
   */
  summaryLetter: 'summary_letter',
  /** An event subject (`<prefix>.ev.>`): only the aggregate's writer appends events. */
  eventSubject: 'event_subject',
  /** An operator answer (`<prefix>.in.*.answer`, `<prefix>.in.*.mesh_answer`). */
  operatorAnswer: 'operator_answer',
  /** Not an inbox subject of this prefix. */
  notInbox: 'not_inbox',
  /** The recorded source consumes no inbox subject redrive may publish to (or is unknown). */
  unknownSource: 'unknown_source',
  /** The recorded source does not consume the letter's subject. */
  subjectNotConsumed: 'subject_not_consumed',
  /** The letter names no original stream sequence, or another stream than `<PREFIX>_INBOX`. */
  noOriginal: 'no_original',
  /** The original at that sequence has another subject or other bytes than the letter. */
  originalMismatch: 'original_mismatch',
  /** The original aged out of (or was deleted from) the inbox stream; `--allow-missing-original` redrives it anyway. */
  originalGone: 'original_gone',
  /** The inbox stream could not be read to check the original (the error is in `detail`). */
  originalUnreadable: 'original_unreadable',
  /** The republish failed (the error is in `detail`); the next redrive tries again. */
  republishFailed: 'republish_failed',
  /** The letter could not hold its original whole (`Baton-Dlq-Truncated`): nothing faithful to republish. */
  truncated: 'truncated',
  /**
   * The original carries a `Nats-Msg-Id` in Baton's form naming another project or message kind
   * (`foreignMsgId`), refused `msg_id_mismatch` when it arrived: the redrive's own id would let it
   * through unchecked. Its publisher sends again under an id of its own.
   */
  msgIdMismatch: 'msg_id_mismatch',
  /**
   * The letter's reason says the message itself was refused ({@link REFUSED_MESSAGE_REASONS}): the
   * same bytes get the same refusal. Its sender publishes a corrected message; `includeRefused`
   * (`baton dlq redrive --include-refused`) republishes it anyway.
   */
  messageRefused: 'message_refused',
} as const;
export type RedriveSkip = (typeof RedriveSkip)[keyof typeof RedriveSkip];

export type RedriveTargetVerdict = { ok: true } | { ok: false; reason: RedriveSkip; detail: string };

/**
 * Dead-letter reasons that say the message itself is wrong — docs/errors.md's "fix the sender":
 * republished unchanged, it is refused again for the same reason. Each with what is wrong with it.
 * Not here: reasons a fix elsewhere cures (`unknown_workflow`, `unknown_agent`, `unknown_mesh` and
 * `not_found`: publish the definition, start the run; `unknown_event_type`, `unsupported_version`:
 * upgrade the reader; `max_deliveries`: fix the cause), and `msg_id_mismatch`, which redrive
 * refuses on the original's own headers whatever the letter says (no flag overrides it).
 */
export const REFUSED_MESSAGE_REASONS: Readonly<Record<string, string>> = {
  [DeadLetterReason.invalidUtf8]: 'its bytes are not UTF-8',
  [DeadLetterReason.malformedJson]: 'its body is not JSON',
  [DeadLetterReason.schemaViolation]: 'its body does not match its schema',
  [RejectionCode.payloadTooLarge]: 'it is over the size cap',
  [RejectionCode.projectMismatch]: 'its body names another project than its subject',
  [RejectionCode.identityMismatch]: 'its body names another agent than its subject',
  [DeadLetterReason.poison]: 'its handler refused it as a message that can never succeed',
  // Router refusals of a start (docs/errors.md 3.1, 3.4): a new id, or a person to notify, is a new message.
  run_already_started: 'its workflow_run_id is taken by another run',
  mesh_already_started: 'its mesh_run_id is taken by another mesh run',
  no_notice_recipient: 'it names no one to notify',
  // A result of an agent the run does not wait for, past the run's cap of such refusals (docs/errors.md 3.1): refused again as it is.
  foreign_refusals_spent: 'it is a result for a run that waits for another agent and holds its cap of refusals of this one',
  // A result of the run's own agent while the run waits for none (held, stopped, finished), past the same cap.
  idle_refusals_spent: 'it is a result for a run that waits for no result and holds its cap of refusals of this agent',
};

/** True when a letter of this reason is refused by redrive unless the caller includes refused messages. */
export function isRefusedMessageReason(reason: string): boolean {
  return Object.hasOwn(REFUSED_MESSAGE_REASONS, reason);
}

/** Options of {@link checkRedriveTarget}. */
export interface RedriveRuleOptions {
  /** Redrive letters whose reason says the message itself was refused ({@link REFUSED_MESSAGE_REASONS}). */
  includeRefused?: boolean;
}

/** Patterns redrive never publishes to, with the reason given. */
const NEVER: ReadonlyArray<{ pattern: string; reason: RedriveSkip }> = [
  { pattern: '{prefix}.ev.>', reason: RedriveSkip.eventSubject },
  { pattern: '{prefix}.in.*.answer', reason: RedriveSkip.operatorAnswer },
  { pattern: '{prefix}.in.*.mesh_answer', reason: RedriveSkip.operatorAnswer },
  { pattern: '{prefix}.cmd.>', reason: RedriveSkip.coreRequest },
];

const resolve = (pattern: string, prefix: string) => pattern.split('{prefix}').join(prefix);

/** One row of the redrive table: a source and the subject patterns it may be redriven to. */
export interface RedriveTableRow {
  source: string;
  subjects: string[];
}

/**
 * The static part of the table for a prefix (the per-agent offer durables follow a rule: see
 * {@link checkRedriveTarget}): each router inbox consumer under its readable source, then under its
 * durable name (the source of the letters it wrote before readable names).
 */
export function redriveTable(prefix: string): RedriveTableRow[] {
  return [
    ...ROUTER_INBOX_CONSUMERS.map((c) => ({ source: c.source as string, subjects: [resolve(c.pattern, prefix)] })),
    ...ROUTER_INBOX_CONSUMERS.map((c) => ({ source: durableNameFor(c.service, c.pattern), subjects: [resolve(c.pattern, prefix)] })),
  ];
}

/**
 * May a dead letter recorded with `source` (its `Baton-Dlq-Source`), original `subject` and
 * `reason` be republished to that subject? Checks the subject and the source, then the reason
 * (a message refused for itself: `message_refused`, unless `opts.includeRefused`); the original
 * itself is checked against the inbox stream by `DlqAdmin.redrive`.
 */
export function checkRedriveTarget(
  prefix: string,
  letter: { source: string; subject: string; dlqSubject: string; originalStream?: string; reason?: string },
  opts: RedriveRuleOptions = {},
): RedriveTargetVerdict {
  if (letter.reason === DeadLetterReason.refusalsSuppressed) return summarySkip(prefix, letter);
  const target = checkSubjectAndSource(prefix, letter);
  if (!target.ok || letter.reason === undefined || opts.includeRefused === true || !isRefusedMessageReason(letter.reason)) return target;
  return {
    ok: false,
    reason: RedriveSkip.messageRefused,
    detail: `${letter.reason}: the message itself is refused (${REFUSED_MESSAGE_REASONS[letter.reason]}), and would be again unchanged; fix the sender and publish a corrected message (--include-refused republishes it as it is)`,
  };
}

/**
 * Why a `refusals_suppressed` letter is not redriven, truthfully for what it stands for: messages a
 * stream stored (a letter naming that stream, or — written by an earlier version, which named every
 * summary `core` — a letter of an inbox consumer: those were stored and acknowledged too), or core
 * messages no stream stores.
 */
function summarySkip(prefix: string, letter: { source: string; originalStream?: string }): RedriveTargetVerdict {
  const inboxConsumer = redriveTable(prefix).some((row) => row.source === letter.source);
  const named = letter.originalStream !== undefined && !isCoreRequestStream(letter.originalStream) ? letter.originalStream : undefined;
  const stream = named ?? (inboxConsumer ? batonStreamNames(prefix).inbox : undefined);
  const head =
    'a refusals_suppressed letter: it stands for refused messages that got no letter of their own, and holds none of them (its bytes are the summary)';
  if (stream === undefined)
    return {
      ok: false,
      reason: RedriveSkip.summaryLetter,
      detail: `${head}; they were core NATS messages no stream stores (requests and agent edge messages), each answered on its sender's own reply subject or relayed nowhere: their senders send again`,
    };
  return {
    ok: false,
    reason: RedriveSkip.summaryLetter,
    detail:
      named !== undefined
        ? `${head}; ${stream} stored them, and their reasons are ones redrive refuses: its body's stored[].sequences name them (nats stream get ${stream} <seq>); their senders publish corrected messages`
        : `${head}; written by an earlier version, it stands for messages ${stream} stored and acknowledged, named only by its first and last subjects and times (its body): find them in ${stream} by subject and time (nats stream view ${stream} --subject <subject> --since …) and publish again those a fix has cured`,
  };
}

/**
 * The `Nats-Msg-Id` of stored headers (any case), or undefined: what redrive checks a message's id
 * by (`foreignMsgId`), in {@link redrivableLetter} and `DlqAdmin.redrive`.
 */
export function msgIdOf(headers: Readonly<Record<string, readonly string[]>>): string | undefined {
  for (const [key, values] of Object.entries(headers)) if (/^nats-msg-id$/i.test(key)) return values[0];
  return undefined;
}

/**
 * Would `baton dlq redrive` (without `--include-refused`) republish the letter of this message, the
 * moment it is written? The same rules, nothing re-listed: {@link checkRedriveTarget} on the letter
 * as it will be stored (its subject, source and reason: {@link REFUSED_MESSAGE_REASONS}), then what
 * redrive checks on the original — it is in `<PREFIX>_INBOX`, and the `Nats-Msg-Id` the stream
 * stored is not a foreign one (`msg_id_mismatch`). False for a core message (no stream stores it).
 *
 * A message a stream stored and acknowledged has no way back but its letter: when this is true the
 * letter is always written whole, never summed up under a sender's budget (`RefusedLetters` in
 * @baton/platform). A truncated letter is not foreseen here (it needs an original near the
 * server's `max_payload`): such a message gets a letter of its own all the same.
 */
export function redrivableLetter(prefix: string, letter: Pick<DeadLetterInput, 'source' | 'subject' | 'stream' | 'reason' | 'headers'>): boolean {
  if (isCoreRequestStream(letter.stream) || letter.stream !== batonStreamNames(prefix).inbox) return false;
  const verdict = checkRedriveTarget(prefix, {
    source: letter.source,
    subject: letter.subject,
    dlqSubject: Subjects.deadLetter(prefix, dlqSourceToken(letter.source)),
    originalStream: letter.stream,
    reason: letter.reason,
  });
  return verdict.ok && foreignMsgId(prefix, letter.subject, msgIdOf(letter.headers ?? {})) === null;
}

/** The subject and source rules of {@link checkRedriveTarget}. */
function checkSubjectAndSource(prefix: string, letter: { source: string; subject: string; dlqSubject: string; originalStream?: string }): RedriveTargetVerdict {
  const { source, subject } = letter;
  if (subject === '') return { ok: false, reason: RedriveSkip.noSubject, detail: 'the letter names no original subject (Baton-Dlq-Subject)' };
  const token = SubjectTable.deadLetter.parse(prefix, letter.dlqSubject)?.source;
  if (token === undefined || dlqSourceToken(source) !== token) {
    return { ok: false, reason: RedriveSkip.sourceMismatch, detail: `Baton-Dlq-Source "${source}" is not the source of ${letter.dlqSubject}` };
  }
  if (letter.originalStream !== undefined && isCoreRequestStream(letter.originalStream)) {
    return {
      ok: false,
      reason: RedriveSkip.coreRequest,
      detail: `a core NATS message to ${subject}: no stream stores it; its sender sends it again (a refused request or agent edge message was answered on its reply subject when that was its own; one whose reply subject was not its own, or that had none, was not)`,
    };
  }
  for (const never of NEVER) {
    if (subjectMatches(resolve(never.pattern, prefix), subject)) {
      // A notice the webhooks did not take: its event is not redriven, the notice is sent again.
      const webhook = source === DlqSources.notifierWebhooks || source === DlqSources.notifierMeshWebhooks;
      const how = webhook ? '; send the notice to the webhooks again with `baton notice redeliver <notice_id> --project <p>`' : '';
      return { ok: false, reason: never.reason, detail: `${subject} is never republished (${resolve(never.pattern, prefix)})${how}` };
    }
  }
  if (!subjectMatches(`${prefix}.in.>`, subject))
    return { ok: false, reason: RedriveSkip.notInbox, detail: `${subject} is not an inbox subject of prefix ${prefix}` };

  const row = redriveTable(prefix).find((r) => r.source === source);
  if (row) {
    if (row.subjects.some((pattern) => subjectMatches(pattern, subject))) return { ok: true };
    return { ok: false, reason: RedriveSkip.subjectNotConsumed, detail: `${source} consumes ${row.subjects.join(', ')}, not ${subject}` };
  }
  if (source.startsWith('offers-')) {
    const offer = SubjectTable.offer.parse(prefix, subject);
    // Letters written before the durable's name took the project's length name it the former way.
    if (offer !== null && (offerDurableName(offer.project, offer.agent) === source || legacyOfferDurableName(offer.project, offer.agent) === source))
      return { ok: true };
    return { ok: false, reason: RedriveSkip.subjectNotConsumed, detail: `${source} consumes the offers of its own agent, not ${subject}` };
  }
  return { ok: false, reason: RedriveSkip.unknownSource, detail: `${source} consumes no inbox subject a redrive may publish to` };
}
