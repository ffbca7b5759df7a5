/**
 * Every NATS subject Baton uses, built in one place. Aggregates have one subject per instance so
 * appends can use `Nats-Expected-Last-Subject-Sequence`.
 */
export const Subjects = {
  /** Prefix of every event subject; streams bind `<prefix>.ev.>`. */
  events: (prefix: string) => `${prefix}.ev.>`,
  aggregate: (prefix: string, project: string, kind: string, id: string) => `${prefix}.ev.${project}.${kind}.${id}`,
  aggregateKind: (prefix: string, kind: string) => `${prefix}.ev.*.${kind}.*`,
  /** Agent results published by agent microservices. */
  agentResult: (prefix: string, project: string, agent: string) => `${prefix}.in.${project}.result.${agent}`,
  agentResults: (prefix: string) => `${prefix}.in.*.result.*`,
  /** Run starts (StartRunRequest). */
  runStart: (prefix: string, project: string) => `${prefix}.in.${project}.start`,
  /** Customer turns of a conversation run (SessionMessage; seed 001). */
  sessionMessage: (prefix: string, project: string) => `${prefix}.in.${project}.message`,
  sessionMessages: (prefix: string) => `${prefix}.in.*.message`,
  /** Requests to stop a run from outside (StopRunRequest; the watchdog). */
  stopRequest: (prefix: string, project: string) => `${prefix}.in.${project}.stop`,
  /** Handoffs offered to an agent (the HandoffRecord; agents' SDKs consume these durably). */
  offer: (prefix: string, project: string, agent: string) => `${prefix}.in.${project}.offer.${agent}`,
  /** The router's request/reply commands (e.g. publish_definition). */
  routerCommand: (prefix: string, project: string, command: string) => `${prefix}.cmd.router.${project}.${command}`,
  /** Operator answers to stop packets and handbacks. */
  operatorAnswer: (prefix: string, project: string) => `${prefix}.in.${project}.answer`,
  operatorAnswers: (prefix: string) => `${prefix}.in.*.answer`,
  /**
   * Every ledger request/reply command (the ledger's subscription). One command is
   * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`: build it with `ledgerCommandSubject`
   * (principal.ts), which names the caller so the server's permissions pin who may send it.
   */
  ledgerCommands: (prefix: string) => `${prefix}.cmd.ledger.>`,
  /** Human action notices. */
  notice: (prefix: string, project: string) => `${prefix}.notice.${project}`,
  /** Handoffs offered to an agent (core NATS wake-up; the source of truth is the stream). */
  agentInbox: (prefix: string, project: string, agent: string) => `${prefix}.agent.${project}.${agent}.handoffs`,
  /** Mesh starts (MeshStartRequest; JetStream into the inbox). */
  meshStart: (prefix: string, project: string) => `${prefix}.in.${project}.mesh_start`,
  meshStarts: (prefix: string) => `${prefix}.in.*.mesh_start`,
  /** Mesh turns: an AgentResult whose workflow_run_id is the mesh run id (JetStream into the inbox). */
  meshResult: (prefix: string, project: string, agent: string) => `${prefix}.in.${project}.mesh_result.${agent}`,
  meshResults: (prefix: string) => `${prefix}.in.*.mesh_result.*`,
  /** Operator answers to a mesh's stop packet (MeshAnswerRequest; JetStream into the inbox). */
  meshAnswer: (prefix: string, project: string) => `${prefix}.in.${project}.mesh_answer`,
  meshAnswers: (prefix: string) => `${prefix}.in.*.mesh_answer`,
  /** Dead letters. */
  deadLetter: (prefix: string, source: string) => `${prefix}.dlq.${source}`,
  deadLetters: (prefix: string) => `${prefix}.dlq.>`,
} as const;

/** Subject tokens may not hold separators or wildcards. */
export function isSubjectToken(value: string): boolean {
  return value.length > 0 && !/[\s.*>]/.test(value);
}
