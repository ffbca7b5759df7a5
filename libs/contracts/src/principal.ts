import { z } from 'zod';
import { AgentNameSchema, ProjectIdSchema } from './common';
import { isPlainSubject, isUnder } from './subject-tokens';

/*
 * Who is speaking on the bus. Baton never takes a sender's identity from a message body: every
 * principal connects with its own NATS credentials, and the subjects it may publish name it, so
 * the server's permissions pin who can say what. This file is the one place that maps a
 * principal to the subject tokens that name it and to its reply-inbox prefix.
 *
 * Principals:
 * - an **agent** of one project (`agent.<agent>` in its ledger subjects; results on
 *   `<prefix>.in.<project>.result.<agent>`);
 * - a **service** (`svc.router`, `svc.watchdog`, `svc.ledger`, `svc.notifier`);
 * - an **operator principal** (`op.notifier`: the notifier relaying an operator it authenticated
 *   with an API token; `op.admin`: the admin connection of the `baton` CLI). Only these two may
 *   name a person (the body's `actor`) and a role (`actor_role`), and only `op.admin` is admin by
 *   its connection alone.
 */

/** The services, each with its own credentials. */
export const ServiceNames = ['router', 'ledger', 'watchdog', 'notifier'] as const;
export type ServiceName = (typeof ServiceNames)[number];
export const ServiceNameSchema = z.enum(ServiceNames);

/** Principals that may speak for a person: the notifier (for a token holder) and the admin CLI. */
export const OperatorRelayNames = ['notifier', 'admin'] as const;
export type OperatorRelayName = (typeof OperatorRelayNames)[number];
export const OperatorRelayNameSchema = z.enum(OperatorRelayNames);

/**
 * The roles of an operator an operator relay speaks for (the notifier's API tokens): viewer reads,
 * operator answers, admin does both for every project. `op.admin` is always admin.
 */
export const OperatorRoleSchema = z.enum(['viewer', 'operator', 'admin']);
export type OperatorRole = z.infer<typeof OperatorRoleSchema>;

/** The kind token of a principal in a subject. */
export const PrincipalKind = { agent: 'agent', service: 'svc', operator: 'op' } as const;
export type PrincipalKind = (typeof PrincipalKind)[keyof typeof PrincipalKind];

export type Principal = { kind: 'agent'; project: string; agent: string } | { kind: 'svc'; service: ServiceName } | { kind: 'op'; relay: OperatorRelayName };

export const Principals = {
  agent: (project: string, agent: string): Principal => ({ kind: 'agent', project, agent }),
  service: (service: ServiceName): Principal => ({ kind: 'svc', service }),
  operator: (relay: OperatorRelayName): Principal => ({ kind: 'op', relay }),
} as const;

/** The two subject tokens that name a principal: `agent.<name>`, `svc.<service>`, `op.<relay>`. */
export function principalTokens(principal: Principal): [PrincipalKind, string] {
  switch (principal.kind) {
    case 'agent':
      return ['agent', principal.agent];
    case 'svc':
      return ['svc', principal.service];
    case 'op':
      return ['op', principal.relay];
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/** A readable name for logs and errors: `agent acme/support`, `service router`, `operator relay notifier`. */
export function describePrincipal(principal: Principal): string {
  switch (principal.kind) {
    case 'agent':
      return `agent ${principal.project}/${principal.agent}`;
    case 'svc':
      return `service ${principal.service}`;
    case 'op':
      return `operator relay ${principal.relay}`;
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The reply-inbox prefix a principal's connection uses (the client's `inboxPrefix`). The server
 * lets each principal subscribe to its own prefix only, so nobody reads another's replies, publish
 * acknowledgements or pulled messages. `_INBOX.>` is granted to no one but the admin.
 */
/**
 * The two parts of a reply-inbox prefix as {@link inboxPrefixOf} writes it, or of a permission
 * pattern under one (`_INBOX_<prefix>.agent.<project>.<agent>.>`): the deployment prefix and the
 * principal's part after it; null for anything else. The one reader of that form.
 */
export function inboxParts(inbox: string): { prefix: string; principal: string } | null {
  const head = '_INBOX_';
  const dot = inbox.indexOf('.');
  if (!inbox.startsWith(head) || dot < 0) return null;
  return { prefix: inbox.slice(head.length, dot), principal: inbox.slice(dot + 1) };
}

/** The part of the inbox space every agent of `project` replies under (each agent's own prefix is one token longer). */
export function projectAgentsInboxPrefix(prefix: string, project: string): string {
  return `_INBOX_${prefix}.agent.${project}`;
}

export function inboxPrefixOf(prefix: string, principal: Principal): string {
  switch (principal.kind) {
    case 'agent':
      return `${projectAgentsInboxPrefix(prefix, principal.project)}.${principal.agent}`;
    case 'svc':
      return `_INBOX_${prefix}.svc.${principal.service}`;
    case 'op':
      return `_INBOX_${prefix}.op.${principal.relay}`;
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Where a service may answer a request from `principal`: under the inbox prefix of the connection
 * that sent it — the agent's or service's own; the notifier's for `op.notifier` (it relays on its
 * own connection); anywhere for `op.admin`, which may publish anything itself (null). A request's
 * reply subject is the requester's to choose, and a service publishes its answer there with its
 * own permissions: answered anywhere else, a reply would publish on the requester's behalf where
 * it may not (an event, an operator answer, a stream API call).
 */
export function replyInboxOf(prefix: string, principal: Principal): string | null {
  if (principal.kind !== 'op') return inboxPrefixOf(prefix, principal);
  return principal.relay === 'admin' ? null : inboxPrefixOf(prefix, { kind: 'svc', service: 'notifier' });
}

/**
 * May a request from `principal` be answered on `reply`? Under its own inbox ({@link replyInboxOf}),
 * or under the admin's: the admin may publish on any subject (the `baton` CLI and the demo speak
 * for an agent that way), and only the admin reads its inbox, so an answer there reaches no one else.
 */
export function mayReplyTo(prefix: string, principal: Principal, reply: string): boolean {
  if (!isPlainSubject(reply)) return false;
  const inbox = replyInboxOf(prefix, principal);
  return inbox === null || isUnder(reply, inbox) || isUnder(reply, inboxPrefixOf(prefix, { kind: 'op', relay: 'admin' }));
}

/**
 * Parse the two principal tokens of a subject. `project` is the subject's project: an agent
 * principal always belongs to it. Returns null for tokens that name no principal.
 */
export function principalFromTokens(project: string, kind: string, name: string): Principal | null {
  switch (kind) {
    case 'agent':
      return AgentNameSchema.safeParse(name).success ? { kind: 'agent', project, agent: name } : null;
    case 'svc': {
      const parsed = ServiceNameSchema.safeParse(name);
      return parsed.success ? { kind: 'svc', service: parsed.data } : null;
    }
    case 'op': {
      const parsed = OperatorRelayNameSchema.safeParse(name);
      return parsed.success ? { kind: 'op', relay: parsed.data } : null;
    }
    default:
      return null;
  }
}

/** A ledger command subject, parsed: `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`. */
export interface LedgerCommandAddress {
  project: string;
  principal: Principal;
  command: string;
}

/** `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>`: the principal is part of the subject. */
export function ledgerCommandSubject(prefix: string, project: string, principal: Principal, command: string): string {
  const [kind, name] = principalTokens(principal);
  return `${prefix}.cmd.ledger.${project}.${kind}.${name}.${command}`;
}

/**
 * Parse a ledger command subject. Null when the subject has another shape, the project is not a
 * project key, or the principal tokens name no principal (the caller answers `unknown_command`).
 */
export function parseLedgerCommandSubject(prefix: string, subject: string): LedgerCommandAddress | null {
  const tokens = subject.split('.');
  if (tokens.length !== 7 || tokens[0] !== prefix || tokens[1] !== 'cmd' || tokens[2] !== 'ledger') return null;
  const [, , , project, kind, name, command] = tokens as [string, string, string, string, string, string, string];
  if (!ProjectIdSchema.safeParse(project).success) return null;
  const principal = principalFromTokens(project, kind, name);
  if (principal === null || command.length === 0) return null;
  return { project, principal, command };
}

/**
 * Whom a ledger command subject names, the principal a rejection is charged to:
 * `<project>/<kind>.<name>` when the subject parses ({@link parseLedgerCommandSubject}), else
 * whatever it holds after `<prefix>.cmd.ledger.` (without authentication a subject names whoever
 * its publisher says; with it, the server's permissions pin each principal to its own).
 */
export function ledgerCommandSenderOf(prefix: string, subject: string): string {
  const address = parseLedgerCommandSubject(prefix, subject);
  if (address !== null) return `${address.project}/${principalTokens(address.principal).join('.')}`;
  const head = `${prefix}.cmd.ledger.`;
  return subject.startsWith(head) ? subject.slice(head.length) : subject;
}

/**
 * The durable consumer that holds one agent's offers: `offers-<n>-<project>-<agent>`, where `n` is
 * the project key's length (with anything other than letters, digits, `_` and `-` replaced by
 * `_`). The length makes the name one agent's alone: project keys and agent names share the
 * characters `-` and `_`, so `offers-<project>-<agent>` (the name before) gave agent `c` of project
 * `a-b` and agent `b-c` of project `a` one durable — and each the right to pull the other's
 * offers. Every replica of the agent pulls the same durable; only the ledger creates it, with its
 * filter pinned to that agent's offer subject, and the agent's credentials allow pulling and
 * acknowledging this durable alone.
 */
export function offerDurableName(project: string, agent: string): string {
  return durableToken(`offers-${project.length}-${project}-${agent}`);
}

/** The name an agent's offers durable had before {@link offerDurableName} (the ledger moves one it finds). */
export function legacyOfferDurableName(project: string, agent: string): string {
  return durableToken(`offers-${project}-${agent}`);
}

/** A durable name of letters, digits, `_` and `-` only (anything else becomes `_`). */
function durableToken(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_');
}
