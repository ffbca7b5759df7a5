import { Subjects } from '@baton/contracts';

/**
 * The subjects an agent microservice uses, for the SDK and for producers in other languages
 * (see the README's table). Results and answers come from `Subjects` in @baton/contracts; the
 * run-start, offer and router-command subjects follow the fixed topology
 * (`<prefix>.in.<project>.start`, `<prefix>.in.<project>.offer.<agent>`,
 * `<prefix>.cmd.router.<project>.<command>`).
 */
export const AgentSubjects = {
  /** Publish an AgentResult here (JetStream, `Nats-Msg-Id` = result_id). */
  result: (prefix: string, project: string, agent: string): string => Subjects.agentResult(prefix, project, agent),
  /** Publish a run start here (JetStream, `Nats-Msg-Id` = workflow_run_id). */
  runStart: (prefix: string, project: string): string => `${prefix}.in.${project}.start`,
  /** Publish a customer message to a conversation run here (JetStream, `Nats-Msg-Id` = message_id). */
  message: (prefix: string, project: string): string => Subjects.sessionMessage(prefix, project),
  /** Handoffs offered to one agent (JetStream; the SDK reads them with a durable consumer). */
  offer: (prefix: string, project: string, agent: string): string => `${prefix}.in.${project}.offer.${agent}`,
  /** Operator answers (JetStream). */
  answer: (prefix: string, project: string): string => Subjects.operatorAnswer(prefix, project),
  /** Ledger request/reply commands (core NATS). */
  ledger: (prefix: string, project: string, command: string): string => Subjects.ledgerCommand(prefix, project, command),
  /** Router request/reply commands, e.g. `publish_definition` (core NATS). */
  router: (prefix: string, project: string, command: string): string => `${prefix}.cmd.router.${project}.${command}`,
} as const;

/**
 * The durable consumer name the SDK uses for an agent's offers. Every replica of the same agent
 * binds the same durable, so JetStream hands each offer to one of them.
 */
export function offerDurableName(project: string, agent: string): string {
  return `offers-${project}-${agent}`.replace(/[^A-Za-z0-9_-]/g, '_');
}
