import { Principals, SubjectTable, Subjects, ledgerCommandSubject, offerDurableName } from '@baton/contracts';

/**
 * The subjects an agent microservice uses, for the SDK and for producers in other languages
 * (see the README's table). All of them are entries of the subject table of @baton/contracts
 * (`SubjectTable`, `parseSubject`), which builds and parses every Baton subject.
 */
export const AgentSubjects = {
  /** Publish an AgentResult here (JetStream, `Nats-Msg-Id` = `result:<project>:<workflow_run_id>/<result_id>`). */
  result: (prefix: string, project: string, agent: string): string => Subjects.agentResult(prefix, project, agent),
  /** Publish a run start on the project's shared subject (actor `project-client`; JetStream, `Nats-Msg-Id` = `start:<project>:<workflow_run_id>`). */
  runStart: (prefix: string, project: string): string => Subjects.runStart(prefix, project),
  /** Publish a run start as this agent (JetStream, the same `Nats-Msg-Id`): only this agent may, and the start records it as the actor. */
  agentRunStart: (prefix: string, project: string, agent: string): string => Subjects.agentRunStart(prefix, project, agent),
  /** Publish a customer message to a conversation run here (JetStream, `Nats-Msg-Id` = `message:<project>:<workflow_run_id>/<message_id>`). */
  message: (prefix: string, project: string): string => Subjects.sessionMessage(prefix, project),
  /** Relay a customer message as this agent (JetStream, the same `Nats-Msg-Id`): only this agent may, and the message records it as `relayed_by`. */
  agentMessage: (prefix: string, project: string, agent: string): string => Subjects.agentSessionMessage(prefix, project, agent),
  /** Handoffs offered to one agent (JetStream; the SDK reads them with a durable consumer). */
  offer: (prefix: string, project: string, agent: string): string => Subjects.offer(prefix, project, agent),
  /** Operator answers (JetStream). */
  answer: (prefix: string, project: string): string => Subjects.operatorAnswer(prefix, project),
  /**
   * Ledger request/reply commands of one agent (core NATS):
   * `<prefix>.cmd.ledger.<project>.agent.<agent>.<command>`. The subject names the agent, so the
   * body never does; the agent's NATS credentials allow only its own.
   */
  ledger: (prefix: string, project: string, agent: string, command: string): string =>
    ledgerCommandSubject(prefix, project, Principals.agent(project, agent), command),
  /** Router request/reply commands, e.g. `publish_definition` (core NATS). */
  router: (prefix: string, project: string, command: string): string => SubjectTable.routerCommand.format(prefix, { project, command }),
} as const;

/**
 * The durable consumer holding an agent's offers (`offers-<n>-<project>-<agent>`; from the contracts).
 * Every replica of the same agent binds the same durable, so JetStream hands each offer to one of
 * them. The ledger creates it (`open_offers`); the agent only pulls and acknowledges.
 */
export { offerDurableName };
