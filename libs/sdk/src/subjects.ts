import { Principals, Subjects, ledgerCommandSubject, offerDurableName } from '@baton/contracts';

/**
 * The subjects an agent microservice uses, for the SDK and for producers in other languages
 * (see the README's table). Results and answers come from `Subjects` in @baton/contracts; the
 * run-start, offer and router-command subjects follow the fixed topology
 * (`<prefix>.in.<project>.start`, `<prefix>.in.<project>.offer.<agent>`,
 * `<prefix>.cmd.router.<project>.<command>`).
 */
export const AgentSubjects = {
  /** Publish an AgentResult here (JetStream, `Nats-Msg-Id` = `result:<project>:<result_id>`). */
  result: (prefix: string, project: string, agent: string): string => Subjects.agentResult(prefix, project, agent),
  /** Publish a run start here (JetStream, `Nats-Msg-Id` = `start:<project>:<workflow_run_id>`). */
  runStart: (prefix: string, project: string): string => `${prefix}.in.${project}.start`,
  /** Publish a customer message to a conversation run here (JetStream, `Nats-Msg-Id` = `message:<project>:<message_id>`). */
  message: (prefix: string, project: string): string => Subjects.sessionMessage(prefix, project),
  /** Handoffs offered to one agent (JetStream; the SDK reads them with a durable consumer). */
  offer: (prefix: string, project: string, agent: string): string => `${prefix}.in.${project}.offer.${agent}`,
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
  router: (prefix: string, project: string, command: string): string => `${prefix}.cmd.router.${project}.${command}`,
} as const;

/**
 * The durable consumer holding an agent's offers (`offers-<project>-<agent>`; from the contracts).
 * Every replica of the same agent binds the same durable, so JetStream hands each offer to one of
 * them. The ledger creates it (`open_offers`); the agent only pulls and acknowledges.
 */
export { offerDurableName };
