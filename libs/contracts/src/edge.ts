import { z } from 'zod';
import { isAgentNoticeSubject } from './claim-withdrawn';
import { AGENT_NAMING_KINDS, bodyIdentityRefusal, decodeInbound, InboxBodySchemas, msgIdOfBody } from './inbound';
import { inboxPrefixOf, offerDurableName, Principals, projectAgentsInboxPrefix } from './principal';
import { RejectionCode } from './rejection';
import { isPlainSubject, isUnder } from './subject-tokens';
import { parseSubject, SubjectTable } from './subjects';

/*
 * The agent edge: the subjects through which an agent reaches JetStream.
 *
 * JetStream answers a publish (its ack), a pull (the messages), an acknowledgement (its
 * confirmation) and every API call on the reply subject the client set — whatever that subject
 * is, with the server's rights. A client that may publish anything JetStream answers could aim
 * that answer at an event subject, another project's inbox, or `$JS.API.STREAM.DELETE.<stream>`.
 * So agents may publish nothing JetStream reads. They publish on `<prefix>.edge.…` instead, and
 * the ledger relays each message to what it stands for, with its headers and bytes, once its reply
 * subject is one Baton answers on (`replyRefusal`, reply-subject.ts: with authentication the agent's
 * own inbox, `mayRelayReply`): JetStream's answer then goes straight to the agent. The shapes:
 *
 *   <prefix>.edge.<project>.<kind>[.<agent>]            → <prefix>.in.<project>.<kind>[.<agent>]
 *     (the inbox kinds an agent publishes: result, mesh_result, start, message, mesh_start)
 *   <prefix>.edge.<project>.offers.<agent>.api.<call>   → $JS.API.<call>
 *     (only CONSUMER.MSG.NEXT and CONSUMER.INFO of the agent's own offers durable)
 *   <prefix>.edge.<project>.offers.<agent>.ack.<tokens> → $JS.ACK.<tokens>
 *     (only acknowledgements of the agent's own offers durable)
 */

/** The inbox kinds an agent publishes (through the edge). */
export const EdgeInputKinds = ['result', 'mesh_result', 'start', 'message', 'mesh_start'] as const;
export type EdgeInputKind = (typeof EdgeInputKinds)[number];

/**
 * Where an edge message goes, and who may have sent it. `sender` is whom the subject names
 * (`<project>/<agent>`, or the project on its shared subject): the budget its refusals count
 * against. The server's permissions pin an agent to its own edge subjects.
 */
export type EdgeRoute =
  | { kind: 'input'; inbox: EdgeInputKind; project: string; agent: string | null; target: string; sender: string }
  | { kind: 'api'; project: string; agent: string; target: string; sender: string }
  | { kind: 'ack'; project: string; agent: string; target: string; sender: string; ack: EdgeAck };

/** What an acknowledgement's subject names (`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.…`), read with the route. */
export interface EdgeAck {
  stream: string;
  consumer: string;
  /** How many times the message was delivered. */
  deliveries: number;
  /** The message's sequence in its stream. */
  streamSeq: number;
}

/**
 * Why an edge subject goes nowhere, and whom it names (as {@link EdgeRoute}'s `sender`, `project`
 * and `agent`: the subject's tokens as far as they go — the agent is the fifth token of every edge
 * shape, none on a project's shared subject).
 */
export interface EdgeRefusal {
  refused: string;
  sender: string;
  /** How a refusal of it is answered ({@link EdgeRefusalAnswer}): a status message for what reads as a pull or an acknowledgement. */
  answer: EdgeAnswerForm;
  project: string;
  agent: string | null;
}

/** The edge subject an agent publishes for an inbox subject (`<prefix>.in.…` → `<prefix>.edge.…`). */
export function edgeSubjectOf(prefix: string, inboxSubject: string): string {
  const head = `${prefix}.in.`;
  if (!inboxSubject.startsWith(head)) throw new Error(`${inboxSubject} is not an inbox subject of prefix ${prefix}`);
  return `${prefix}.edge.${inboxSubject.slice(head.length)}`;
}

/** The JetStream API prefix an agent's client uses for its offers durable: its calls go through the edge. */
export function edgeApiPrefix(prefix: string, project: string, agent: string): string {
  return `${prefix}.edge.${project}.offers.${agent}.api`;
}

/** The edge subject of an acknowledgement (`$JS.ACK.<tokens>` → `<prefix>.edge.<project>.offers.<agent>.ack.<tokens>`). */
export function edgeAckSubject(prefix: string, project: string, agent: string, ackSubject: string): string {
  if (!ackSubject.startsWith('$JS.ACK.')) throw new Error(`${ackSubject} is not an acknowledgement subject`);
  return `${prefix}.edge.${project}.offers.${agent}.ack.${ackSubject.slice('$JS.ACK.'.length)}`;
}

/**
 * Read an edge subject: where it goes and who sent it, or why it goes nowhere. `inboxStream` is
 * the deployment's inbox stream (the offers durables' stream).
 */
export function parseEdgeSubject(prefix: string, subject: string, inboxStream: string): EdgeRoute | EdgeRefusal {
  const tokens = subject.split('.');
  // Whom the subject names: the project (third token) and the agent (fifth) of every edge shape.
  const project = tokens[2] ?? '';
  const agent = tokens[4];
  const sender = agent === undefined ? project : `${project}/${agent}`;
  // A pull or an acknowledgement (by its shape) is answered with a status message, as JetStream answers one.
  const answer: EdgeAnswerForm =
    tokens[3] === 'offers' && (tokens[5] === 'ack' || (tokens[5] === 'api' && tokens.slice(6, 9).join('.') === 'CONSUMER.MSG.NEXT')) ? 'status' : 'json';
  const refused = (why: string): EdgeRefusal => ({ refused: why, sender, answer, project, agent: agent ?? null });
  if (!isPlainSubject(subject) || tokens[0] !== prefix || tokens[1] !== 'edge' || tokens.length < 4) {
    return refused(`${subject} is not <prefix>.edge.<project>.…`);
  }
  if (tokens[3] === 'offers') return offersRoute(tokens, project, inboxStream, subject, refused);
  const target = [prefix, 'in', ...tokens.slice(2)].join('.');
  const parsed = parseSubject(prefix, target);
  if (parsed === null || parsed.name === 'unknown' || SubjectTable[parsed.name].area !== 'in' || !(EdgeInputKinds as readonly string[]).includes(tokens[3]!)) {
    return refused(`${subject} names no inbox subject an agent publishes (${EdgeInputKinds.join(', ')})`);
  }
  return { kind: 'input', inbox: tokens[3] as EdgeInputKind, project, agent: agent ?? null, target, sender };
}

function offersRoute(tokens: string[], project: string, inboxStream: string, subject: string, refused: (why: string) => EdgeRefusal): EdgeRoute | EdgeRefusal {
  const agent = tokens[4];
  if (agent === undefined || tokens.length < 7) return refused(`${subject} is not <prefix>.edge.<project>.offers.<agent>.(api|ack).…`);
  const sender = `${project}/${agent}`;
  const durable = offerDurableName(project, agent);
  const rest = tokens.slice(6);
  if (tokens[5] === 'api') {
    // CONSUMER.MSG.NEXT.<stream>.<durable> or CONSUMER.INFO.<stream>.<durable>, of its own durable only.
    const call = rest.join('.');
    if (call === `CONSUMER.MSG.NEXT.${inboxStream}.${durable}` || call === `CONSUMER.INFO.${inboxStream}.${durable}`) {
      return { kind: 'api', project, agent, target: `$JS.API.${call}`, sender };
    }
    return refused(`${subject}: an agent's edge carries only CONSUMER.MSG.NEXT and CONSUMER.INFO of its own offers durable ${durable}`);
  }
  if (tokens[5] === 'ack') {
    // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>: the form nats-server
    // 2.9 writes and routes on its first two tokens. (The form with a domain and an account hash
    // first is refused: a server routes on the tokens it reads, and a check of other tokens could
    // pass an ack into another durable's space.)
    if (rest.length === 7 && rest[0] === inboxStream && rest[1] === durable) {
      const ack: EdgeAck = { stream: inboxStream, consumer: durable, deliveries: Number(rest[2]), streamSeq: Number(rest[3]) };
      return { kind: 'ack', project, agent, target: `$JS.ACK.${rest.join('.')}`, sender, ack };
    }
    return refused(`${subject}: an agent acknowledges only messages of its own offers durable ${durable}`);
  }
  return refused(`${subject} is not <prefix>.edge.<project>.offers.<agent>.(api|ack).…`);
}

/** The longest wait and the shortest heartbeat an agent's pull may ask for (ns). */
export const EDGE_PULL_LIMITS = { maxBatch: 1_000, maxExpiresNs: 300e9, minHeartbeatNs: 500e6 } as const;

/**
 * Is `body` one the edge relays for this route? A pull (`CONSUMER.MSG.NEXT`) is a JSON object of
 * `batch` (1–1 000), `expires` (up to 5 minutes, ns), `max_bytes`, `idle_heartbeat` (at least
 * 500 ms, ns) and `no_wait` — a 1 ns heartbeat had the server send thousands of messages a second
 * for one request; `CONSUMER.INFO` has no body; an acknowledgement is `+ACK` (or empty), `-NAK`
 * with an optional `{"delay": ns}`, `+WPI` or `+TERM` with an optional reason — never `+NXT`, a
 * pull in disguise. Inputs (results, starts, messages) are read by {@link readEdgeInput}. Returns
 * why not, or null.
 */
export function edgeBodyRefusal(route: EdgeRoute, body: Uint8Array): string | null {
  if (route.kind === 'input') return null;
  const text = new TextDecoder().decode(body);
  if (route.kind === 'ack') {
    if (text === '' || text === '+ACK' || text === '+WPI' || text === '-NAK' || text === '+TERM') return null;
    if (text.startsWith('+TERM ') && text.length <= 1_024) return null;
    if (text.startsWith('-NAK ')) {
      const delay = parseObject(text.slice(5));
      if (delay !== null && Object.keys(delay).every((k) => k === 'delay') && isIntIn(delay['delay'], 0, 86_400e9)) return null;
    }
    return `an acknowledgement is +ACK, -NAK (optionally {"delay": ns}), +WPI or +TERM (optionally a reason up to 1 KiB), not ${JSON.stringify(text.slice(0, 40))}`;
  }
  if (route.target.startsWith('$JS.API.CONSUMER.INFO.')) return text.trim() === '' ? null : 'CONSUMER.INFO takes no body';
  const pull = parseObject(text);
  if (pull === null) return 'a pull is a JSON object';
  for (const [key, value] of Object.entries(pull)) {
    const ok =
      key === 'batch'
        ? isIntIn(value, 1, EDGE_PULL_LIMITS.maxBatch)
        : key === 'expires'
          ? isIntIn(value, 1, EDGE_PULL_LIMITS.maxExpiresNs)
          : key === 'max_bytes'
            ? isIntIn(value, 0, Number.MAX_SAFE_INTEGER)
            : key === 'idle_heartbeat'
              ? isIntIn(value, EDGE_PULL_LIMITS.minHeartbeatNs, EDGE_PULL_LIMITS.maxExpiresNs)
              : key === 'no_wait'
                ? typeof value === 'boolean'
                : false;
    if (!ok)
      return `a pull takes batch (1–${EDGE_PULL_LIMITS.maxBatch}), expires (≤ ${EDGE_PULL_LIMITS.maxExpiresNs} ns), max_bytes, idle_heartbeat (≥ ${EDGE_PULL_LIMITS.minHeartbeatNs} ns) and no_wait; ${key} = ${JSON.stringify(value)} is not one`;
  }
  return null;
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function isIntIn(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/**
 * May an edge message from this sender have `reply` as its reply subject? Only the sender's own
 * inbox: the agent's for a subject that names it; for a project's shared subject (a start or a
 * message any of its agents may publish), the inbox of an agent of that project — NATS does not
 * tell the edge which one sent it. Never an agent's notice subject (`isAgentNoticeSubject`).
 */
export function mayRelayReply(prefix: string, sender: Pick<EdgeRoute, 'project' | 'agent'>, reply: string): boolean {
  if (!isPlainSubject(reply)) return false;
  // Where an agent listens for the services' notices is no reply subject: on a shared subject the
  // sender may name a sibling's inbox, and an answer there would be read as a notice.
  if (isAgentNoticeSubject(prefix, sender.project, reply)) return false;
  if (sender.agent !== null) return isUnder(reply, inboxPrefixOf(prefix, Principals.agent(sender.project, sender.agent)));
  // A shared subject: under some agent's inbox of the project (an agent token, then the rest).
  const project = projectAgentsInboxPrefix(prefix, sender.project);
  return isUnder(reply, project) && reply.slice(project.length + 1).includes('.');
}

// ---------------------------------------------------------------------------------------------
// The edge's answer to what it refuses
// ---------------------------------------------------------------------------------------------

/**
 * Why the edge refused a message, as its answer names it (the reason of the dead letter that
 * records it): a subject that stands for nothing an agent may reach (`no_handler`), an inbox
 * message over the cap (`payload_too_large`), a body or header the edge does not carry
 * (`schema_violation`, and for an inbox message's body the other codes its consumer would refuse
 * it with: `invalid_utf8`, `malformed_json`, `project_mismatch`, `identity_mismatch`), a message id
 * naming another project, kind or message, or a redrive's (`msg_id_mismatch`), a run start naming a
 * workflow the project's current definition does not have (`unknown_workflow`, read fresh before it
 * is refused). A reply subject that is not the sender's own (`reply_not_allowed`) is never answered:
 * the answer would go where the sender may not publish.
 */
export const EdgeRefusalReasons = [
  'no_handler',
  'payload_too_large',
  'schema_violation',
  'msg_id_mismatch',
  'invalid_utf8',
  'malformed_json',
  'project_mismatch',
  'identity_mismatch',
  'unknown_workflow',
] as const;
export type EdgeRefusalReason = (typeof EdgeRefusalReasons)[number];

/** One field an inbox message's body was refused for (as the SDK's `InvalidInputError` names them): its path, why, and the check's own code when it has one. */
const EdgeRefusalIssueSchema = z.object({
  path: z.string().describe('the dotted path of the field, `(root)` for the body itself'),
  message: z.string(),
  code: z.string().optional().describe("the check's own stable code (e.g. `no_notice_recipient`), when it has one"),
});

/** The header of a status answer (to a pull or an acknowledgement) that names the refusal's reason. */
export const EDGE_REFUSAL_HEADER = 'Baton-Refusal';
/** The header of a status answer that says why, in words (at most {@link EDGE_REFUSAL_DETAIL_CHARS} characters, one line). */
export const EDGE_REFUSAL_DETAIL_HEADER = 'Baton-Refusal-Detail';
/** Longest detail an answer carries (the dead letter keeps the whole). */
export const EDGE_REFUSAL_DETAIL_CHARS = 512;
/** The status code of every refusal answer: JetStream's for a request it will not serve. */
export const EDGE_REFUSAL_STATUS = 400;

/**
 * The answer the edge sends to what it refused, in the form the client waiting on it reads
 * JetStream's own answers in: `json`, a JetStream API error (`{"error": {code, description, …}}`)
 * for a publish into the inbox and a `CONSUMER.INFO` call — a JetStream client throws it as the
 * API error it carries —; `status`, an empty message whose header status line is
 * `400 <description>` for a pull and an acknowledgement (a pull's answer with a body would be
 * read as an offer). Both carry the reason typed: `error.reason` in the body, the
 * {@link EDGE_REFUSAL_HEADER} header in a status answer.
 */
export type EdgeRefusalAnswer =
  | { form: 'json'; body: EdgeRefusalReply }
  | { form: 'status'; code: number; description: string; headers: Record<string, string> };

/** The body of a `json` refusal answer (docs/schemas/edge-refusal-reply.json). */
export const EdgeRefusalReplySchema = z.object({
  error: z.object({
    code: z.literal(EDGE_REFUSAL_STATUS).describe('the JetStream API error code: 400, a request the edge will not serve'),
    description: z.string().describe('`<reason>: <detail>`, for people; branch on `reason`'),
    reason: z.enum(EdgeRefusalReasons).describe('why the edge refused the message (the dead letter that records it has the same reason)'),
    detail: z.string().max(EDGE_REFUSAL_DETAIL_CHARS).describe('why, in words'),
    issues: z
      .array(EdgeRefusalIssueSchema)
      .max(20)
      .optional()
      .describe("an inbox message's body refused for its fields: each field, as its consumer would have named it"),
  }),
});
export type EdgeRefusalReply = z.infer<typeof EdgeRefusalReplySchema>;

/** How a refusal is answered: `status` for a pull or an acknowledgement, `json` for the rest. */
export type EdgeAnswerForm = 'json' | 'status';

/** How a refusal of what `parseEdgeSubject` read is answered: as its route or refusal says. */
export function edgeAnswerForm(read: EdgeRoute | EdgeRefusal): EdgeAnswerForm {
  if ('refused' in read) return read.answer;
  return read.kind === 'ack' || read.target.startsWith('$JS.API.CONSUMER.MSG.NEXT.') ? 'status' : 'json';
}

/** One line of at most {@link EDGE_REFUSAL_DETAIL_CHARS} characters, as a header value may hold. */
function oneLine(text: string): string {
  const line = text.replace(/[\r\n\t]+/g, ' ').replace(/[^\x20-\x7e\u00a0-\uffff]/g, '?');
  return line.length <= EDGE_REFUSAL_DETAIL_CHARS ? line : `${line.slice(0, EDGE_REFUSAL_DETAIL_CHARS - 1)}…`;
}

/** The answer to an edge message on `subject` refused for `reason` (see {@link EdgeRefusalAnswer}); `issues`: the fields of a body refused. */
export function edgeRefusalAnswer(form: EdgeAnswerForm, reason: EdgeRefusalReason, detail: string, issues?: readonly EdgeRefusalIssue[]): EdgeRefusalAnswer {
  const said = oneLine(detail);
  if (form === 'status') {
    return {
      form: 'status',
      code: EDGE_REFUSAL_STATUS,
      description: `Baton Edge Refused ${reason}`,
      headers: { [EDGE_REFUSAL_HEADER]: reason, [EDGE_REFUSAL_DETAIL_HEADER]: said },
    };
  }
  const listed =
    issues !== undefined && issues.length > 0 ? { issues: issues.slice(0, 20).map((issue) => ({ ...issue, message: oneLine(issue.message) })) } : {};
  return { form: 'json', body: { error: { code: EDGE_REFUSAL_STATUS, description: `${reason}: ${said}`, reason, detail: said, ...listed } } };
}

export type EdgeRefusalIssue = z.infer<typeof EdgeRefusalIssueSchema>;

/** Why the edge refuses an inbox message's body, as its consumer would, or null (see {@link readEdgeInput}). */
export interface EdgeInputRefusal {
  reason: EdgeRefusalReason;
  detail: string;
  issues: EdgeRefusalIssue[];
}

/** An inbox message's body as its consumer will read it, or why the consumer would refuse it ({@link readEdgeInput}). */
export type EdgeInput = { refused: EdgeInputRefusal } | { body: { project: string } & Record<string, unknown> };

/**
 * Read an inbox message's body as its consumer will. The edge reads it as its consumer does
 * (`InboxBodySchemas`, `decodeInbound`: UTF-8, JSON, the kind's schema) and checks it against the
 * identity its subject carries (`bodyIdentityRefusal`: the project; on a result or mesh turn, the
 * agent), so an agent is told at once what would otherwise only be a dead letter of the consumer
 * after the stream acknowledged it. A `Nats-Msg-Id` in Baton's form for this project and kind must
 * be the id of this very message (`msgIdOfBody`: the run and result, message or mesh run its body
 * names): an id naming another message of the project would take that message's id first. An id in
 * another form (a client's own) or none is left to the stream. What needs state — a run that does
 * not exist, a claim — is the consumer's to decide; the workflow a start names is checked by the
 * edge itself against the project's definition (`unknown_workflow`), from the body returned here.
 */
export function readEdgeInput(route: Extract<EdgeRoute, { kind: 'input' }>, body: Uint8Array, msgId: string | undefined): EdgeInput {
  const refused = (refusal: EdgeInputRefusal): EdgeInput => ({ refused: refusal });
  const kind = route.inbox;
  const decoded = decodeInbound(body, InboxBodySchemas[kind]);
  if (!decoded.ok) {
    const { rejection } = decoded;
    return refused({ reason: edgeReasonOf(rejection.code), detail: rejection.message, issues: rejection.issues });
  }
  const value = decoded.value as { project: string; agent?: string } & Record<string, unknown>;
  const identity = bodyIdentityRefusal({ project: route.project, agent: AGENT_NAMING_KINDS.has(kind) ? route.agent : null }, value);
  if (identity !== null)
    return refused({
      reason: identity.code === RejectionCode.projectMismatch ? 'project_mismatch' : 'identity_mismatch',
      detail: identity.message,
      issues: [],
    });
  const own = msgIdOfBody(kind, value);
  if (msgId !== undefined && own !== null && msgId !== own && msgId.startsWith(`${kind}:${route.project}:`)) {
    return refused({
      reason: 'msg_id_mismatch',
      detail: `the Nats-Msg-Id ${JSON.stringify(msgId.slice(0, 200))} is not this message's: its body makes it ${JSON.stringify(own.slice(0, 200))}`,
      issues: [],
    });
  }
  return { body: value };
}

/** The edge's reason for a rejection code its body check can give (the rest cannot occur there: `schema_violation`). */
function edgeReasonOf(code: RejectionCode): EdgeRefusalReason {
  return (EdgeRefusalReasons as readonly string[]).includes(code) ? (code as EdgeRefusalReason) : 'schema_violation';
}

/**
 * The edge's refusal in an error a JetStream client threw for a publish or an API call (the
 * client keeps the answer's `error` as `api_error`), or null when it is no such refusal.
 */
export function edgeRefusalOf(error: unknown): EdgeRefusalReply['error'] | null {
  if (typeof error !== 'object' || error === null || !('api_error' in error)) return null;
  const parsed = EdgeRefusalReplySchema.shape.error.safeParse((error as { api_error: unknown }).api_error);
  return parsed.success ? parsed.data : null;
}
