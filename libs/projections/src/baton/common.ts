import { clipText, HandoffEscalatedSchema, HoldKindSchema, StopWhySchema, type HandoffPriority } from '@baton/contracts';
import { Op, type ProjectionOp } from '../ops';
import type { SequencedEvent } from '../store';

/** Inbox / stop urgency by priority: the `urgent` order sorts on it (highest first). */
export const UrgencyByPriority: Readonly<Record<HandoffPriority, number>> = { urgent: 4, high: 3, medium: 2, low: 1 };

/** The kinds of operator inbox item. */
export const InboxKind = { stop: 'stop', hold: 'hold', handback: 'handback', escalation: 'escalation' } as const;
export type InboxKind = (typeof InboxKind)[keyof typeof InboxKind];

/**
 * Every `why` an inbox item carries: a stop's why (`StopWhy`), a hold's kind (`hold`, `human_gate`),
 * an escalation's cause (`lease_expired`, `rework`); a handback has none. What a `why` filter takes.
 */
export const InboxWhys: readonly string[] = [...new Set([...StopWhySchema.options, ...HoldKindSchema.options, ...HandoffEscalatedSchema.shape.cause.options])];

/** Inbox item statuses: open, then `answered` (a person's answer or handback decision ended it) or `closed` (anything else did). */
export const InboxStatus = { open: 'open', answered: 'answered', closed: 'closed' } as const;
export type InboxStatus = (typeof InboxStatus)[keyof typeof InboxStatus];

/** One line of a handoff's or run's history, as the API and the CLI show it. */
export interface TimelineEntry {
  seq: number;
  event_id: string;
  type: string;
  occurred_at: string;
  actor: string;
  origin: string;
  /** One engine-written sentence saying what happened. */
  summary: string;
  /** On an agent's result: what it said, as posted (its words and exactly one canonical sentinel for its decision). */
  said?: string;
}

/** The domain-facing `{ type, data }` of a decoded envelope. */
export function domainEvent<E extends { type: string; data: unknown }>(event: SequencedEvent): E {
  return { type: event.type, data: event.payload } as E;
}

/** Event time in epoch milliseconds (the item stores' `at`). */
export function eventMs(event: SequencedEvent): number {
  return isoMs(event.occurredAt);
}

export function isoMs(iso: string): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) && ms >= 0 ? ms : 0;
}

/** The op adding a timeline entry (a sorted set scored by stream seq; the entry is its JSON). */
export function timelineOp(key: string, event: SequencedEvent, summary: string, said?: string): ProjectionOp {
  return Op.zadd(key, event.seq, JSON.stringify(timelineEntryOf(event, summary, said)));
}

/** The timeline entry of an event: its sequence, id, type, time, actor and origin, the summary (at most 500 characters) and what was said. */
export function timelineEntryOf(event: SequencedEvent, summary: string, said?: string): TimelineEntry {
  return {
    seq: event.seq,
    event_id: event.id,
    type: event.type,
    occurred_at: event.occurredAt,
    actor: event.actor,
    origin: event.origin,
    summary: clip(summary, 500),
    ...(said !== undefined ? { said } : {}),
  };
}

export const clip: (text: string, max: number) => string = clipText;
