import { CreateHandoffCommandSchema, MsgIds, Subjects, createEventRegistry, type EventEnvelope } from '@baton/contracts';
import { handoffDecider } from '@baton/domain';
import { eventHeaders, headersFrom, type NatsHandle } from '@baton/eventstore';
import { nowMs, round } from './stats';

export interface OpenHandoffsResult {
  handoffs: number;
  /** Appends per second (windowed publishes of `handoff.created`). */
  append_per_s: number;
  /** Seconds until every service had consumed them (or the wait gave up). */
  digest_seconds: number;
  digested: boolean;
}

const encoder = new TextEncoder();

/**
 * Create `count` open (pending) handoffs by appending their `handoff.created` events directly to
 * the event store (the same events the ledger's decider produces, one new subject each, with
 * `Nats-Expected-Last-Subject-Sequence: 0` and `Nats-Msg-Id` = `MsgIds.event`, as the store does), then wait for the
 * services to digest them (the ledger reactor folds each one, the notifier projects it, the
 * watchdog tracks it).
 */
export async function createOpenHandoffs(
  nats: NatsHandle,
  prefix: string,
  project: string,
  count: number,
  quiesce: () => Promise<boolean>,
): Promise<OpenHandoffsResult> {
  const registry = createEventRegistry();
  const tag = Date.now().toString(36);
  const version = registry.currentVersion('handoff.created');
  const now = new Date().toISOString();
  const started = nowMs();
  const inFlight = new Set<Promise<unknown>>();
  for (let i = 0; i < count; i++) {
    const id = `open-${tag}-${i}`;
    const data = CreateHandoffCommandSchema.parse({
      handoff_id: id,
      project,
      from_agent: 'lead',
      // Addressed to a role (a queue any worker of the role may claim), so the ledger offers them to
      // nobody: the measurement is what the services hold for 100 000 open handoffs, not how fast
      // 100 000 offers go out.
      to_role: 'worker',
      summary: `open handoff ${i} of the memory measurement`,
      context: { n: i },
      idempotency_key: `create-${id}`,
    });
    const decision = handoffDecider.decide({ type: 'create', data, metadata: { now, actor: 'lead', actorKind: 'agent' } }, handoffDecider.initialState());
    if (!decision.ok) throw new Error(`the handoff decider refused the bench create: ${decision.error.code}`);
    const event = decision.events[0] as { type: string; data: unknown };
    // Stored as the event store stores it: the payload its validation returns.
    const checked = registry.validatePayload(event.type, event.data);
    if (!checked.ok) throw new Error(`the bench's ${event.type} does not validate: ${checked.rejection.message}`);
    const envelope: EventEnvelope = {
      id: `${id}:0`,
      type: event.type,
      version,
      aggregate: { kind: 'handoff', id },
      project,
      occurredAt: now,
      actor: 'lead',
      origin: 'agent',
      causationId: null,
      correlationId: id,
      payload: checked.value,
    };
    const hdrs = headersFrom(eventHeaders(registry, envelope.type, version));
    const ack = nats.js
      .publish(Subjects.aggregate(prefix, project, 'handoff', id), encoder.encode(JSON.stringify(envelope)), {
        msgID: MsgIds.event(project, 'handoff', id, envelope.id),
        headers: hdrs,
        expect: { lastSubjectSequence: 0 },
      })
      .finally(() => inFlight.delete(ack));
    inFlight.add(ack);
    if (inFlight.size >= 256) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  const appended = nowMs();
  const digested = await quiesce();
  return {
    handoffs: count,
    append_per_s: Math.round(count / ((appended - started) / 1000)),
    digest_seconds: round((nowMs() - appended) / 1000, 1),
    digested,
  };
}
