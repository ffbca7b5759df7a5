import { z } from 'zod';
import { ProjectControlCommandSchemas, type ProjectControlCommandName } from './governance';
import {
  ActorNameSchema,
  CompleteFromResultCommandSchema,
  CreateHandoffCommandSchema,
  HandoffActorKindSchema,
  HandoffCommandSchemas,
  type HandoffActorKind,
  type HandoffCommandName,
} from './handoff';
import { OperatorRoleSchema, type OperatorRole, type Principal, type ServiceName } from './principal';

/*
 * Who may say what to the ledger. Every ledger command arrives on
 * `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>` (`ledgerCommandSubject`), and the NATS
 * server lets each principal publish only the subjects that name it. The ledger therefore takes
 * the caller's identity from the SUBJECT (`resolveLedgerCaller`) and checks the command against
 * {@link LedgerCommandAccess} before anything is decided. A body may still carry `actor`,
 * `actor_kind` and `actor_role`, but only as a claim that must agree with the subject's principal;
 * only the two operator relays (`op.notifier`, `op.admin`) name a person in the body. The notifier
 * names the person it authenticated (an API token), who is then the actor; the admin connection is
 * the actor itself (`admin`), and a person its body names is recorded beside it as a claim
 * (`on_behalf_of`, on pause and resume only: {@link OnBehalfOfCommands}).
 *
 * Refusals (answered with `kind: 'forbidden'` and recorded as a dead letter):
 * - `identity_mismatch`: the body claims another actor, another actor kind or a role the subject's
 *   principal does not have;
 * - `principal_not_allowed`: the principal may not issue this command at all.
 */

/** The codes of the ledger's access refusals (kind `forbidden`). */
export const LedgerAccessErrorCode = {
  /** The body's `actor` / `actor_kind` / `actor_role` disagrees with the principal the subject names. */
  identityMismatch: 'identity_mismatch',
  /** The subject's principal may not issue this command (see {@link LedgerCommandAccess}). */
  principalNotAllowed: 'principal_not_allowed',
} as const;
export type LedgerAccessErrorCode = (typeof LedgerAccessErrorCode)[keyof typeof LedgerAccessErrorCode];

// ---------------------------------------------------------------------------------------------
// open_offers: the ledger provisions an agent's offers durable (agents create no consumers).
// ---------------------------------------------------------------------------------------------

/** Bounds of the offers durable's ack wait an agent may ask for (ms). */
export const OfferAckWaitBounds = { minMs: 1_000, maxMs: 60 * 60 * 1000, defaultMs: 60_000 } as const;

/**
 * Body of `open_offers` (agents only; no handoff id): provision this agent's offers durable on the
 * inbox stream, filtered to `<prefix>.in.<project>.offer.<agent>` of the SUBJECT's principal.
 * Idempotent: every replica of the agent sends it at start and binds the same durable.
 */
export const OpenOffersCommandSchema = z.strictObject({
  /** How long the server waits for an ack before redelivering an offer to another replica (default 60 s). */
  ack_wait_ms: z
    .number()
    .int()
    .min(OfferAckWaitBounds.minMs)
    .max(OfferAckWaitBounds.maxMs)
    .optional()
    .describe('how long an offer delivered and not acknowledged waits before it is delivered again (default 60 s; absent: the durable keeps its own)'),
  /**
   * When the durable has to be made now (the first open, or after it was lost), start after this
   * inbox sequence — the reader's ack floor — instead of at the beginning. An existing durable is
   * unaffected; an agent can only move where its OWN offers durable starts.
   */
  start_after_seq: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "only when the durable is made now (the first open, or after it was lost — its CONSUMER.INFO answered 'consumer not found'; nats-server 2.9 leaves a pull on it unanswered): start after this inbox sequence, the last offer your reader acknowledged, instead of at the beginning; an existing durable is left as it is",
    ),
});
export type OpenOffersCommand = z.infer<typeof OpenOffersCommandSchema>;

/** The reply to `open_offers`: the stream and durable the agent pulls its offers from. */
export const OpenOffersReplySchema = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), stream: z.string().min(1), durable: z.string().min(1) }),
  z.strictObject({
    ok: z.literal(false),
    error: z.object({ code: z.string().min(1), kind: z.string().min(1), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
  }),
]);
export type OpenOffersReply = z.infer<typeof OpenOffersReplySchema>;

// ---------------------------------------------------------------------------------------------
// complete_then_create: the router's two dispatch commands of one hop in one request.
// ---------------------------------------------------------------------------------------------

/**
 * Body of `complete_then_create` (the router only): a `complete_from_result` and a `create`, run
 * by the ledger in that order as if each had come in a request of its own (same checks, same
 * events, same idempotency). The creation is tried only when the completion was applied or had
 * been done before (`handoff_not_open`), so the stream keeps the finished handoff's completion
 * before the next handoff's creation. Either part that does not validate refuses the whole request
 * (nothing is decided). The reply is {@link CompleteThenCreateReply} (`ledger-protocol.ts`).
 */
export const CompleteThenCreateCommandSchema = z.strictObject({
  complete: CompleteFromResultCommandSchema,
  create: CreateHandoffCommandSchema,
});
export type CompleteThenCreateCommand = z.input<typeof CompleteThenCreateCommandSchema>;

/**
 * The same request checked only as far as its two parts (each an object, nothing else beside
 * them): the ledger checks each part with its own command's schema as it prepares it, so the parts
 * are parsed once.
 */
export const CompleteThenCreatePartsSchema = z.strictObject({
  complete: z.record(z.string(), z.unknown()),
  create: z.record(z.string(), z.unknown()),
});

// ---------------------------------------------------------------------------------------------
// The command table.
// ---------------------------------------------------------------------------------------------

/** The body schema of each ledger command, by the last token of its subject. */
export const LedgerCommandSchemas = {
  ...HandoffCommandSchemas,
  ...ProjectControlCommandSchemas,
  open_offers: OpenOffersCommandSchema,
  complete_then_create: CompleteThenCreateCommandSchema,
} as const;
export type LedgerCommandName = HandoffCommandName | ProjectControlCommandName | 'open_offers' | 'complete_then_create';

/** True when `token` names a ledger command. */
export function isLedgerCommand(token: string): token is LedgerCommandName {
  return Object.prototype.hasOwnProperty.call(LedgerCommandSchemas, token);
}

/** Who may issue one ledger command. */
export interface LedgerCommandRule {
  /** Agents (of the subject's project: an agent principal always belongs to it). */
  agent: boolean;
  /** Services, by name. */
  services: readonly ServiceName[];
  /** The notifier relaying an operator whose token has one of these roles (empty: never). */
  notifierRoles: readonly OperatorRole[];
  /** The admin CLI (`op.admin`, admin by its connection). */
  admin: boolean;
}

const PEOPLE_AND_AGENTS: LedgerCommandRule = { agent: true, services: [], notifierRoles: ['operator', 'admin'], admin: true };

/**
 * Who may issue what, checked by the ledger before deciding (`principal_not_allowed` otherwise).
 * The handoff lifecycle commands are open to agents and to people (through the notifier with an
 * answering role, or the admin CLI); the handoff decider then checks the claimer, the addressee,
 * the delegator and the reviewed worker against the subject-derived actor. The internal commands
 * belong to the one service that sends them.
 */
export const LedgerCommandAccess: Readonly<Record<LedgerCommandName, LedgerCommandRule>> = {
  // Agents delegate within their own project (the subject pins it); the router dispatches runs.
  create: { agent: true, services: ['router'], notifierRoles: [], admin: false },
  claim: PEOPLE_AND_AGENTS,
  heartbeat: PEOPLE_AND_AGENTS,
  return: PEOPLE_AND_AGENTS,
  decide_handback: PEOPLE_AND_AGENTS,
  release: PEOPLE_AND_AGENTS,
  // ... and the router, for the handoff of a run stopped from outside (its work is dead).
  abandon: { ...PEOPLE_AND_AGENTS, services: ['router'] },
  fail: PEOPLE_AND_AGENTS,
  archive: PEOPLE_AND_AGENTS,
  // The watchdog owns time: lease expiry and handoff deadlines.
  requeue_expired: { agent: false, services: ['watchdog'], notifierRoles: [], admin: false },
  expire_deadline: { agent: false, services: ['watchdog'], notifierRoles: [], admin: false },
  // The router closes a dispatched handoff with the result its run recorded.
  complete_from_result: { agent: false, services: ['router'], notifierRoles: [], admin: false },
  // ... and, on the hop's path, closes it and creates the next step's handoff in one request.
  complete_then_create: { agent: false, services: ['router'], notifierRoles: [], admin: false },
  // The kill switch: admins only.
  pause: { agent: false, services: [], notifierRoles: ['admin'], admin: true },
  resume: { agent: false, services: [], notifierRoles: ['admin'], admin: true },
  // An agent opens its own offers durable ...
  open_offers: { agent: true, services: [], notifierRoles: [], admin: false },
  // ... and says when it gave up on an offer it never claimed (the decider checks it is the addressee).
  give_up_offer: { agent: true, services: [], notifierRoles: [], admin: false },
};

// ---------------------------------------------------------------------------------------------
// The caller, from the subject.
// ---------------------------------------------------------------------------------------------

/** The actor name and kind each service acts as on the ledger. */
export const ServiceActors: Readonly<Record<ServiceName, { actor: string; kind: HandoffActorKind }>> = {
  router: { actor: 'baton-router', kind: 'system' },
  watchdog: { actor: 'baton-watchdog', kind: 'watchdog' },
  ledger: { actor: 'baton-ledger', kind: 'system' },
  notifier: { actor: 'baton-notifier', kind: 'system' },
};

/** The actor `op.admin` acts as, whoever its body names (that person is `on_behalf_of`). */
export const ADMIN_ACTOR = 'admin';

/**
 * The commands on which `op.admin` may name the person it acts for: their events record that name
 * as `on_behalf_of` beside the actor `admin`. Elsewhere (the handoff commands, whose events have no
 * place for it) a named person is refused `identity_mismatch`: the trail would lose it.
 */
export const OnBehalfOfCommands: readonly LedgerCommandName[] = ['pause', 'resume'];

/** Who issued a ledger command, as the ledger records it. `role` is set for operator relays only. */
export interface LedgerCaller {
  principal: Principal;
  actor: string;
  kind: HandoffActorKind;
  role?: OperatorRole;
  /**
   * `op.admin` only: the person its body named (`actor`, the CLI's `BATON_OPERATOR`). A claim the
   * admin connection makes, not an identity: the actor stays `admin` (the principal that sent it),
   * and this is recorded beside it as `on_behalf_of`.
   */
  on_behalf_of?: string;
}

/** What a body may claim about its sender. `undefined` = not claimed. */
export interface IdentityClaims {
  actor?: unknown;
  actor_kind?: unknown;
  actor_role?: unknown;
}

export type CallerResolution =
  | { ok: true; caller: LedgerCaller }
  | { ok: false; code: LedgerAccessErrorCode | 'schema_violation'; message: string; path: string };

/**
 * The identity claims a ledger command body may carry beside the command itself (the envelope),
 * as the published JSON Schemas state them. Each is optional and checked against the subject's
 * principal ({@link resolveLedgerCaller}), then removed ({@link splitIdentityClaims}) before the
 * command's own strict schema parses the rest; so a body that repeats its sender's identity is
 * valid, and one that claims another is refused `identity_mismatch` by the ledger, not by a schema.
 */
export const LedgerIdentityClaimsShape = {
  actor: ActorNameSchema.optional().describe(
    "Checked against the subject's principal: an agent or a service may only repeat its own actor name (agent.<a>: a; svc.router: baton-router...); op.notifier must name the operator it relays (the actor); op.admin may name the person it acts for on pause and resume (the actor stays admin; the name is recorded as on_behalf_of, a claim).",
  ),
  actor_kind: HandoffActorKindSchema.optional().describe(
    "Checked against the subject's principal: agent for an agent, the service's kind for a service (system, or watchdog for the watchdog), operator for an operator relay.",
  ),
  actor_role: OperatorRoleSchema.optional().describe(
    "Checked against the subject's principal: only an operator relay carries a role (required from op.notifier: the relayed token's role; admin only from op.admin).",
  ),
};

/** Envelope field names of a ledger command body (the keys {@link splitIdentityClaims} removes). */
export const LedgerIdentityClaimKeys = Object.keys(LedgerIdentityClaimsShape) as Array<keyof typeof LedgerIdentityClaimsShape>;

/**
 * A ledger command's body as it goes on the wire: the command's schema with the optional
 * envelope fields of {@link LedgerIdentityClaimsShape} beside its own (at the top level only; the
 * parts of `complete_then_create` carry none). What the JSON Schemas of docs/schemas publish; the
 * ledger itself splits the claims off and parses the command alone, with the same verdict.
 */
export function withIdentityClaims(schema: z.ZodType): z.ZodType {
  if (schema instanceof z.ZodObject) return schema.extend(LedgerIdentityClaimsShape);
  if (schema instanceof z.ZodDiscriminatedUnion) {
    const options = (schema.options as z.ZodType[]).map((option) => withIdentityClaims(option)) as [z.ZodObject, ...z.ZodObject[]];
    return z.discriminatedUnion(schema.def.discriminator, options);
  }
  throw new TypeError('withIdentityClaims: a ledger command body is an object or a discriminated union of objects');
}

/** Split a body into its identity claims and the command itself. */
export function splitIdentityClaims(body: Record<string, unknown>): { claims: IdentityClaims; command: Record<string, unknown> } {
  const { actor, actor_kind, actor_role, ...command } = body;
  return { claims: { actor, actor_kind, actor_role }, command };
}

function mismatch(path: string, message: string): CallerResolution {
  return { ok: false, code: LedgerAccessErrorCode.identityMismatch, message, path };
}

function invalid(path: string, message: string): CallerResolution {
  return { ok: false, code: 'schema_violation', message, path };
}

/** A principal that names its actor itself (an agent or a service): the body may only repeat it. */
function fixedIdentity(principal: Principal, actor: string, kind: HandoffActorKind, claims: IdentityClaims, who: string): CallerResolution {
  if (claims.actor !== undefined && claims.actor !== actor) {
    return mismatch('actor', `${who} is ${actor}; the body may not name ${JSON.stringify(claims.actor)}`);
  }
  if (claims.actor_kind !== undefined && claims.actor_kind !== kind) {
    return mismatch('actor_kind', `${who} acts as ${kind}; the body may not claim ${JSON.stringify(claims.actor_kind)}`);
  }
  if (claims.actor_role !== undefined) return mismatch('actor_role', `${who} holds no operator role; the body may not claim one`);
  return { ok: true, caller: { principal, actor, kind } };
}

/**
 * The caller of a ledger command, from the subject's principal alone; the body's claims are only
 * checked against it:
 * - `agent.<a>` → actor `a`, kind `agent`;
 * - `svc.<s>` → the service's actor (`ServiceActors`: `baton-router` kind `system`,
 *   `baton-watchdog` kind `watchdog`...);
 * - `op.notifier` → actor = the body's `actor` (required), kind `operator`, role = the body's
 *   `actor_role` (required: viewer | operator | admin; the notifier relays the token's name and role);
 * - `op.admin` → actor `admin`, kind `operator`, role `admin`; a person the body's `actor` names
 *   (other than `admin`) is `on_behalf_of`, a claim recorded beside the actor, never as it.
 * An agent or service whose body names another actor, another kind or any role, and an operator
 * relay whose body claims a kind other than `operator` (or, for `op.admin`, a role other than
 * `admin`), is refused with `identity_mismatch`; a missing or malformed name or role the relay
 * must give is a `schema_violation`.
 */
export function resolveLedgerCaller(principal: Principal, claims: IdentityClaims): CallerResolution {
  switch (principal.kind) {
    case 'agent':
      return fixedIdentity(principal, principal.agent, 'agent', claims, `agent ${principal.agent}`);
    case 'svc': {
      const service = ServiceActors[principal.service];
      return fixedIdentity(principal, service.actor, service.kind, claims, `service ${principal.service}`);
    }
    case 'op': {
      if (claims.actor_kind !== undefined && claims.actor_kind !== 'operator') {
        return mismatch('actor_kind', `operator relay ${principal.relay} speaks for an operator; the body may not claim ${JSON.stringify(claims.actor_kind)}`);
      }
      if (principal.relay === 'admin') {
        if (claims.actor_role !== undefined && claims.actor_role !== 'admin') {
          return mismatch('actor_role', `the admin connection is admin; the body may not claim ${JSON.stringify(claims.actor_role)}`);
        }
        // The admin connection is the actor: whom it names is what it says it acts for.
        if (claims.actor === undefined || claims.actor === ADMIN_ACTOR)
          return { ok: true, caller: { principal, actor: ADMIN_ACTOR, kind: 'operator', role: 'admin' } };
        const named = ActorNameSchema.safeParse(claims.actor);
        if (!named.success) return invalid('actor', 'actor must be an actor name (letters, digits and _ - . : @)');
        return { ok: true, caller: { principal, actor: ADMIN_ACTOR, kind: 'operator', role: 'admin', on_behalf_of: named.data } };
      }
      const actor = ActorNameSchema.safeParse(claims.actor);
      if (!actor.success) return invalid('actor', 'the notifier names the operator it relays: actor is required (an actor name)');
      const role = OperatorRoleSchema.safeParse(claims.actor_role);
      if (!role.success) return invalid('actor_role', "the notifier names the operator's role: actor_role is required (viewer | operator | admin)");
      return { ok: true, caller: { principal, actor: actor.data, kind: 'operator', role: role.data } };
    }
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/** True when `caller` may issue `command` (see {@link LedgerCommandAccess}). */
export function mayIssue(command: LedgerCommandName, caller: Pick<LedgerCaller, 'principal' | 'role'>): boolean {
  const rule = LedgerCommandAccess[command];
  const { principal } = caller;
  switch (principal.kind) {
    case 'agent':
      return rule.agent;
    case 'svc':
      return rule.services.includes(principal.service);
    case 'op':
      if (principal.relay === 'admin') return rule.admin;
      return caller.role !== undefined && rule.notifierRoles.includes(caller.role);
    default: {
      const never: never = principal;
      throw new Error(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/**
 * A person `op.admin` names is recorded only where the command's events have a place for it
 * ({@link OnBehalfOfCommands}); anywhere else the claim would be dropped from the trail, so the
 * request is refused `identity_mismatch` (path `actor`). Null when nothing is wrong.
 */
export function onBehalfOfRefusal(command: LedgerCommandName, caller: Pick<LedgerCaller, 'on_behalf_of'>): CallerResolution | null {
  if (caller.on_behalf_of === undefined || OnBehalfOfCommands.includes(command)) return null;
  return mismatch(
    'actor',
    `the admin connection sends ${command} as ${ADMIN_ACTOR}; it may name the person it acts for (${JSON.stringify(caller.on_behalf_of)}) only on ${OnBehalfOfCommands.join(' and ')}`,
  );
}

/** A readable list of who may issue `command` (docs and refusal messages). */
export function describeAccess(command: LedgerCommandName): string {
  const rule = LedgerCommandAccess[command];
  const who: string[] = [];
  if (rule.agent) who.push("the project's agents");
  for (const service of rule.services) who.push(`svc.${service}`);
  if (rule.notifierRoles.length > 0) who.push(`op.notifier (role ${rule.notifierRoles.join(' | ')})`);
  if (rule.admin) who.push('op.admin');
  return who.join(', ');
}
