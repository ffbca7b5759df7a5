import { durableNameFor } from './subject-patterns';

/**
 * The dead-letter source names of Baton's consumers: what `Baton-Dlq-Source` says and the last
 * token of `<prefix>.dlq.<source>`. Each consumer has a readable name of its own, independent of
 * its durable name: durable consumers keep the names they were created with (renaming one would
 * create a new consumer that reads its stream again), while the dead letters they write name them
 * readably. Letters written before these names existed carry the durable name (or an older source
 * name); {@link LEGACY_DLQ_SOURCES} maps those to the readable one, so listing, filtering and
 * redrive recognise both.
 */
export const DlqSources = {
  /** The router's inbox consumers (`<prefix>.in.*.…`). */
  routerStarts: 'router-starts',
  routerAgentStarts: 'router-agent-starts',
  routerResults: 'router-results',
  routerAnswers: 'router-answers',
  routerMessages: 'router-messages',
  routerAgentMessages: 'router-agent-messages',
  routerStops: 'router-stops',
  routerMeshStarts: 'router-mesh-starts',
  routerAgentMeshStarts: 'router-agent-mesh-starts',
  routerMeshTurns: 'router-mesh-turns',
  routerMeshAnswers: 'router-mesh-answers',
  /** The router's event reactors: dispatch (run events), returnable-handoff deadlines (handoff events), meshes (mesh events). */
  routerDispatch: 'router-dispatch',
  routerHandoffDeadlines: 'router-handoff-deadlines',
  routerMeshReactor: 'router-mesh-reactor',
  /** Refused `publish_definition` requests (core NATS). */
  routerDefinitions: 'router-definitions',
  /** Refused ledger commands (core NATS). */
  ledger: 'ledger',
  /** Agent edge messages relayed nowhere (core NATS; `libs/contracts/src/edge.ts`). */
  ledgerEdge: 'ledger-edge',
  /** The ledger's reactors: handoff policies and offers (handoff events), the project kill switch (project events). */
  ledgerHandoffReactor: 'ledger-handoff-reactor',
  ledgerProjectReactor: 'ledger-project-reactor',
  /** The watchdog's escalation consumer (handoff events), retired: letters of earlier watchdogs only. */
  watchdogEscalations: 'watchdog-escalations',
  /** The notifier's projection applier, and its webhook deliveries of run and mesh notices. */
  notifierProjections: 'notifier-projections',
  notifierWebhooks: 'notifier-webhooks',
  notifierMeshWebhooks: 'notifier-mesh-webhooks',
} as const;
export type DlqSource = (typeof DlqSources)[keyof typeof DlqSources];

/**
 * The router's `@EventPattern`s, as written in its decorators, with the readable source of each
 * consumer. The durable of each stays `durableNameFor('router', pattern)`.
 */
export const ROUTER_DLQ_SOURCES: Readonly<Record<string, DlqSource>> = {
  '{prefix}.in.*.start': DlqSources.routerStarts,
  '{prefix}.in.*.start.*': DlqSources.routerAgentStarts,
  '{prefix}.in.*.result.*': DlqSources.routerResults,
  '{prefix}.in.*.answer': DlqSources.routerAnswers,
  '{prefix}.in.*.message': DlqSources.routerMessages,
  '{prefix}.in.*.message.*': DlqSources.routerAgentMessages,
  '{prefix}.in.*.stop': DlqSources.routerStops,
  '{prefix}.in.*.mesh_start': DlqSources.routerMeshStarts,
  '{prefix}.in.*.mesh_start.*': DlqSources.routerAgentMeshStarts,
  '{prefix}.in.*.mesh_result.*': DlqSources.routerMeshTurns,
  '{prefix}.in.*.mesh_answer': DlqSources.routerMeshAnswers,
  '{prefix}.ev.*.run.*': DlqSources.routerDispatch,
  '{prefix}.ev.*.handoff.*': DlqSources.routerHandoffDeadlines,
  '{prefix}.ev.*.mesh.*': DlqSources.routerMeshReactor,
};

/**
 * Source names dead letters carried before the readable names, and the readable name each stands
 * for: the durable names (the transport's `durableNameFor('router', pattern)`, the ledger's,
 * watchdog's and notifier's durables) and `ledger-reactor`, the old name of the handoff reactor's
 * own letters.
 */
export const LEGACY_DLQ_SOURCES: Readonly<Record<string, DlqSource>> = {
  ...Object.fromEntries(Object.entries(ROUTER_DLQ_SOURCES).map(([pattern, source]) => [durableNameFor('router', pattern), source])),
  ledger_handoff_reactor: DlqSources.ledgerHandoffReactor,
  'ledger-reactor': DlqSources.ledgerHandoffReactor,
  ledger_project_reactor: DlqSources.ledgerProjectReactor,
  watchdog_escalations: DlqSources.watchdogEscalations,
  notifier_projections: DlqSources.notifierProjections,
  notifier_webhooks: DlqSources.notifierWebhooks,
  notifier_webhooks_mesh: DlqSources.notifierMeshWebhooks,
};

/** The readable name of a recorded dead-letter source: a legacy name's readable one, else the name itself. */
export function readableDlqSource(recorded: string): string {
  return Object.prototype.hasOwnProperty.call(LEGACY_DLQ_SOURCES, recorded) ? (LEGACY_DLQ_SOURCES[recorded] as string) : recorded;
}

/** True when two recorded sources name the same consumer (the same name, or a legacy name and its readable one). */
export function sameDlqSource(a: string, b: string): boolean {
  return readableDlqSource(a) === readableDlqSource(b);
}
