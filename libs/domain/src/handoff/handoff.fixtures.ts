/*
 * Builders for handoff tests (not exported from the library). Names: alice delegates, bob and
 * carol are workers, lena is the project's lead, olga is an operator, wd is the watchdog.
 */
import type { CompletionReport, HandoffActorKind, HandoffCommandMetadata, HandoffEvent } from '@baton/contracts';
import { fold } from '../decider';
import type { ClaimHandoff, CreateHandoff, DecideHandback, HandoffCommand, ProjectRoster, RequeueExpired, ReturnHandoff } from './commands';
import { handoffDecider } from './decider';
import { reactToHandoffEvent } from './policies';
import type { HandoffState } from './state';

export const T0 = '2026-01-01T00:00:00.000Z';
export const HID = 'h-1';
export const PROJECT = 'proj';
export const LEASE_MS = 60_000;

/** The ISO time `seconds` after T0. */
export function at(seconds: number): string {
  return new Date(Date.parse(T0) + seconds * 1000).toISOString();
}

export function meta(actor: string, actorKind: HandoffActorKind = 'agent', now: string = T0): HandoffCommandMetadata {
  return { actor, actorKind, now };
}

export const roster: ProjectRoster = { visible_actors: ['alice', 'bob', 'carol', 'lena'], project_lead: 'lena' };

export const goodReport: CompletionReport = {
  summary: 'implemented the parser',
  files_changed: ['src/parser.ts'],
  verification: 'npm test',
  next_steps: '',
  outcome: 'completed',
  evidence: { tests_run: ['parser.spec.ts: 12 passed'] },
};

export function report(overrides: Partial<CompletionReport> = {}): CompletionReport {
  return { ...goodReport, ...overrides };
}

export const deriveId = (...parts: string[]): string => parts.join(':');

export const cmd = {
  create(overrides: Partial<CreateHandoff['data']> = {}, metadata: HandoffCommandMetadata = meta('alice')): CreateHandoff {
    return {
      type: 'create',
      data: {
        handoff_id: HID,
        project: PROJECT,
        kind: 'task',
        priority: 'medium',
        from_agent: 'alice',
        summary: 'write the parser',
        context: {},
        acceptance: { tests: 'green' },
        max_retries: 3,
        idempotency_key: `create:${overrides.handoff_id ?? HID}`,
        ...overrides,
      },
      metadata,
    };
  },
  claim(actor: string, claimId: string, seconds = 0, overrides: Partial<ClaimHandoff['data']> = {}, kind: HandoffActorKind = 'agent'): ClaimHandoff {
    return {
      type: 'claim',
      data: { handoff_id: HID, claim_id: claimId, lease_ms: LEASE_MS, claimer_roles: [], idempotency_key: `claim:${claimId}`, ...overrides },
      metadata: meta(actor, kind, at(seconds)),
    };
  },
  heartbeat(actor: string, claimId: string, seconds: number, key = `hb:${claimId}:${seconds}`): HandoffCommand {
    return {
      type: 'heartbeat',
      data: { handoff_id: HID, claim_id: claimId, lease_ms: LEASE_MS, idempotency_key: key },
      metadata: meta(actor, 'agent', at(seconds)),
    };
  },
  ret(
    actor: string,
    claimId: string | undefined,
    seconds = 10,
    rep: CompletionReport = goodReport,
    kind: HandoffActorKind = 'agent',
    overrides: Partial<ReturnHandoff['data']> = {},
  ): ReturnHandoff {
    return {
      type: 'return',
      data: {
        handoff_id: HID,
        ...(claimId !== undefined ? { claim_id: claimId } : {}),
        report: rep,
        handback_id: `hb-${claimId ?? 'op'}`,
        roster,
        idempotency_key: `return:${claimId ?? 'op'}`,
        ...overrides,
      },
      metadata: meta(actor, kind, at(seconds)),
    };
  },
  decide(handbackId: string, actor: string, decision: 'accept' | 'rework', kind: HandoffActorKind = 'agent', seconds = 20): DecideHandback {
    const data =
      decision === 'accept'
        ? { handoff_id: handbackId, decision, idempotency_key: `decide:${handbackId}:${actor}` }
        : { handoff_id: handbackId, decision, note: 'add tests for the error paths', idempotency_key: `decide:${handbackId}:${actor}` };
    return { type: 'decide_handback', data, metadata: meta(actor, kind, at(seconds)) };
  },
  requeue(claimId: string, seconds: number, overrides: Partial<RequeueExpired['data']> = {}): RequeueExpired {
    return {
      type: 'requeue_expired',
      data: {
        handoff_id: HID,
        claim_id: claimId,
        project_lead: 'lena',
        escalation_handoff_id: `esc-${claimId}`,
        idempotency_key: `requeue:${claimId}`,
        ...overrides,
      },
      metadata: meta('wd', 'watchdog', at(seconds)),
    };
  },
  release(actor: string, claimId: string | undefined, kind: HandoffActorKind = 'agent'): HandoffCommand {
    return {
      type: 'release',
      data: { handoff_id: HID, ...(claimId ? { claim_id: claimId } : {}), reason: 'not my area', idempotency_key: `release:${actor}` },
      metadata: meta(actor, kind, at(5)),
    };
  },
  abandon(actor: string, kind: HandoffActorKind = 'agent'): HandoffCommand {
    return { type: 'abandon', data: { handoff_id: HID, reason: 'no longer needed', idempotency_key: `abandon:${actor}` }, metadata: meta(actor, kind, at(5)) };
  },
  fail(actor: string, claimId: string | undefined, kind: HandoffActorKind = 'agent'): HandoffCommand {
    return {
      type: 'fail',
      data: { handoff_id: HID, ...(claimId ? { claim_id: claimId } : {}), reason: 'the build is broken', idempotency_key: `fail:${actor}` },
      metadata: meta(actor, kind, at(5)),
    };
  },
  archive(actor = 'olga', kind: HandoffActorKind = 'operator'): HandoffCommand {
    return { type: 'archive', data: { handoff_id: HID, idempotency_key: `archive:${actor}` }, metadata: meta(actor, kind, at(30)) };
  },
};

/** Decide each command in turn against the folded state; throws when one is refused. */
export function history(...commands: HandoffCommand[]): HandoffEvent[] {
  const events: HandoffEvent[] = [];
  for (const command of commands) {
    const result = handoffDecider.decide(command, fold(handoffDecider, events));
    if (!result.ok) throw new Error(`history: ${command.type} refused with ${result.error.code}`);
    events.push(...result.events);
  }
  return events;
}

/**
 * A tiny in-memory ledger for multi-handoff flows: decides a command, appends its events and runs
 * the policies to quiescence, exactly as the ledger service does. Returns the refusal, if any.
 */
export class Ledger {
  readonly streams = new Map<string, HandoffEvent[]>();
  readonly refusedReactions: string[] = [];

  constructor(readonly projectLead: string | undefined = 'lena') {}

  state(id: string): HandoffState {
    return fold(handoffDecider, this.streams.get(id) ?? []);
  }

  send(aggregateId: string, command: HandoffCommand): { ok: true; events: HandoffEvent[] } | { ok: false; code: string } {
    const result = handoffDecider.decide(command, this.state(aggregateId));
    if (!result.ok) return { ok: false, code: result.error.code };
    const stream = this.streams.get(aggregateId) ?? [];
    this.streams.set(aggregateId, stream);
    for (const event of result.events) {
      stream.push(event);
      const reactions = reactToHandoffEvent(event, { state: this.state(aggregateId), deriveId, projectLead: this.projectLead });
      for (const reaction of reactions) {
        const outcome = this.send(reaction.aggregateId, reaction.command);
        if (!outcome.ok) this.refusedReactions.push(`${reaction.command.type}:${outcome.code}`);
      }
    }
    return { ok: true, events: result.events };
  }
}
