/**
 * The kinds of message Baton publishes into its shared streams with a `Nats-Msg-Id`. The kind is
 * the id's first part, so a run start and a result that happen to carry the same id never collide.
 */
export const MsgKind = {
  start: 'start',
  result: 'result',
  message: 'message',
  answer: 'answer',
  stop: 'stop',
  meshStart: 'mesh_start',
  meshResult: 'mesh_result',
  meshAnswer: 'mesh_answer',
  offer: 'offer',
  event: 'ev',
} as const;
export type MsgKind = (typeof MsgKind)[keyof typeof MsgKind];

/**
 * The `Nats-Msg-Id` of every message Baton publishes into a stream that all projects share
 * (`<PREFIX>_INBOX`, `<PREFIX>_EVENTS`): `<kind>:<project>:<id>` (events:
 * `ev:<project>:<aggregate kind>:<aggregate id>:<event id>`). JetStream drops a message whose id it
 * saw within the stream's duplicate window (2 minutes), so an id scoped only by what the caller
 * chose (a `workflow_run_id`, a `result_id`) would let a second project's start or result be
 * silently dropped as the first one's duplicate. Project keys hold no `:`, so the parts never run
 * together. A result, a customer message or an operator's answer need be unique only within its
 * run, so its id names the run too: `<kind>:<project>:<run id>/<id>` (ids hold no `/`, so the run
 * and the id never run together either). A retry of the same message keeps its id and is stored once.
 */
export const MsgIds = {
  /** A run start (`<prefix>.in.<project>.start`). */
  start: (project: string, workflowRunId: string) => `${MsgKind.start}:${project}:${workflowRunId}`,
  /** An agent result (`<prefix>.in.<project>.result.<agent>`): `result:<project>:<workflow_run_id>/<result_id>`. */
  result: (project: string, workflowRunId: string, resultId: string) => `${MsgKind.result}:${project}:${workflowRunId}/${resultId}`,
  /** A customer's message to a conversation run (`<prefix>.in.<project>.message`): `message:<project>:<workflow_run_id>/<message_id>`. */
  message: (project: string, workflowRunId: string, messageId: string) => `${MsgKind.message}:${project}:${workflowRunId}/${messageId}`,
  /** An operator's answer to a run (`<prefix>.in.<project>.answer`): `answer:<project>:<workflow_run_id>/<answer_id>`. */
  answer: (project: string, workflowRunId: string, answerId: string) => `${MsgKind.answer}:${project}:${workflowRunId}/${answerId}`,
  /** A stop request from outside the run (`<prefix>.in.<project>.stop`; the watchdog). */
  stop: (project: string, packetId: string) => `${MsgKind.stop}:${project}:${packetId}`,
  /** A mesh start (`<prefix>.in.<project>.mesh_start`). */
  meshStart: (project: string, meshRunId: string) => `${MsgKind.meshStart}:${project}:${meshRunId}`,
  /** A mesh turn (`<prefix>.in.<project>.mesh_result.<agent>`): `mesh_result:<project>:<mesh_run_id>/<result_id>`. */
  meshResult: (project: string, meshRunId: string, resultId: string) => `${MsgKind.meshResult}:${project}:${meshRunId}/${resultId}`,
  /** An operator's answer to a mesh stop (`<prefix>.in.<project>.mesh_answer`): `mesh_answer:<project>:<mesh_run_id>/<answer_id>`. */
  meshAnswer: (project: string, meshRunId: string, answerId: string) => `${MsgKind.meshAnswer}:${project}:${meshRunId}/${answerId}`,
  /** An offer of a handoff (`<prefix>.in.<project>.offer.<agent>`), per the event that caused it. */
  offer: (project: string, handoffId: string, cause: string) => `${MsgKind.offer}:${project}:${handoffId}:${cause}`,
  /** An event appended to an aggregate (`<prefix>.ev.<project>.<kind>.<id>`). */
  event: (project: string, kind: string, aggregateId: string, eventId: string) => `${MsgKind.event}:${project}:${kind}:${aggregateId}:${eventId}`,
} as const;

/** A project key's form (`ProjectIdSchema`): what the second part of a Baton-form id must look like to name one. */
const PROJECT_KEY = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** The message kinds an inbox subject (`<prefix>.in.<project>.<kind>…`) names with the same token as its `Nats-Msg-Id`. */
const INBOX_KINDS: ReadonlySet<string> = new Set([
  MsgKind.start,
  MsgKind.result,
  MsgKind.message,
  MsgKind.answer,
  MsgKind.stop,
  MsgKind.meshStart,
  MsgKind.meshResult,
  MsgKind.meshAnswer,
  MsgKind.offer,
]);

/**
 * Why a message on an inbox subject carries a `Nats-Msg-Id` it may not: an id in Baton's form
 * (`<kind>:<project>:…`, a kind of {@link MsgKind}) that names another project or another kind than
 * the subject it was published on; null when the id is fine, absent, or of another form (a
 * redrive's `redrive:…`, a client's own scheme). Such an id can only be meant to take another
 * project's (or message kind's) id first: the inbox stream's duplicate window covers every subject,
 * so the real message published under it later is dropped as its duplicate.
 */
export function foreignMsgId(prefix: string, subject: string, msgId: string | undefined): string | null {
  if (msgId === undefined) return null;
  const kindEnd = msgId.indexOf(':');
  if (kindEnd <= 0) return null;
  const kind = msgId.slice(0, kindEnd);
  if (!INBOX_KINDS.has(kind)) return null;
  const head = `${prefix}.in.`;
  if (!subject.startsWith(head)) return null;
  const projectEnd = subject.indexOf('.', head.length);
  if (projectEnd < 0) return null;
  const project = subject.slice(head.length, projectEnd);
  const kindTokenEnd = subject.indexOf('.', projectEnd + 1);
  const subjectKind = subject.slice(projectEnd + 1, kindTokenEnd < 0 ? undefined : kindTokenEnd);
  // Baton's form has three parts at least; `start:<id>` (a client's own, or an older scheme) names no project.
  const idProjectEnd = msgId.indexOf(':', kindEnd + 1);
  if (idProjectEnd < 0) return null;
  const idProject = msgId.slice(kindEnd + 1, idProjectEnd);
  if (!PROJECT_KEY.test(idProject)) return null;
  if (idProject !== project)
    return `the Nats-Msg-Id ${JSON.stringify(msgId.slice(0, 200))} names project '${idProject.slice(0, 64)}', the subject '${project}'`;
  if (kind !== subjectKind) return `the Nats-Msg-Id ${JSON.stringify(msgId.slice(0, 200))} names a ${kind}, the subject a ${subjectKind}`;
  return null;
}
