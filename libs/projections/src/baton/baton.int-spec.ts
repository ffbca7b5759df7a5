import type { EventEnvelope, HandoffEvent } from '@baton/contracts';
import { fold, handoffDecider, toHandoffRecord } from '@baton/domain';
import { diffSnapshots } from '../snapshot';
import type { ReplaySource, SequencedEvent } from '../store';
import { redisFixture, type RedisFixture } from '../test-support';
import { createBatonProjector, type BatonProjector } from './projector';
import { foldScenario, scenarioLog, scenarioSteps, type ScenarioEvent, type ScenarioStep } from './scenario';
import { createBatonViews, type BatonViews } from './views';
import type { InboxItem } from './inbox';

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];

const envelopes = (events: ScenarioEvent[]): SequencedEvent[] => scenarioLog(events);

const source =
  (log: SequencedEvent[]): ReplaySource =>
  (fromSeq) =>
    (async function* () {
      for (const event of log) if (event.seq >= fromSeq) yield event;
    })();

/** The scenario plus: the hold of wr-b answered, the escalation's consult withdrawn by an operator. */
function extendedSteps(): ScenarioStep[] {
  const wf = scenarioSteps()[0];
  if (wf.aggregate !== 'run' || wf.command.type !== 'start_run') throw new Error('unexpected scenario');
  const { workflow } = wf.command.data;
  return [
    ...scenarioSteps(),
    {
      aggregate: 'run',
      id: 'wr-b',
      actor: 'olga',
      origin: 'operator',
      command: {
        type: 'resume',
        data: {
          answer: { kind: 'hold_answer', answer: { answer_id: 'ans-b1', action: 'terminate', answered_by: 'olga', answered_at: '2026-01-01T09:30:00.000Z' } },
          workflow,
          agents: [],
        },
        metadata: { now: '2026-01-01T09:30:00.000Z', actor: 'olga', actorRole: 'operator' },
      },
    },
    {
      aggregate: 'handoff',
      id: 'esc-h-3',
      actor: 'olga',
      origin: 'operator',
      command: {
        type: 'abandon',
        data: { handoff_id: 'esc-h-3', reason: 'handled by phone', idempotency_key: 'abandon:esc' },
        metadata: { now: '2026-01-01T09:31:00.000Z', actor: 'olga', actorKind: 'operator' },
      },
    },
  ];
}

/** The times of a scenario's steps: minute `m` of hour `hour` on 2026-01-01. */
const minuteAt =
  (hour: string) =>
  (minute: number): string =>
    `2026-01-01T${hour}:${String(minute).padStart(2, '0')}:00.000Z`;

/** A handoff command as a scenario step, at a minute of `at`. */
const handoffStep =
  (at: (minute: number) => string) =>
  (id: string, minute: number, actor: string, actorKind: 'agent' | 'watchdog' | 'operator', command: Record<string, unknown>): ScenarioStep =>
    ({ aggregate: 'handoff', id, actor, origin: actorKind, command: { ...command, metadata: { now: at(minute), actor, actorKind } } }) as ScenarioStep;

/**
 * A handoff (of run `run`, when given) created with a retry cap of 0, claimed, and its lease lapsed:
 * escalated to `lead` with a consult when one is named, else to nobody (a `guard_failed` outcome).
 */
function lapsedHandoff(at: (minute: number) => string, id: string, minute: number, run?: string, lead?: string): ScenarioStep[] {
  const step = handoffStep(at);
  return [
    step(id, minute, 'alice', 'agent', {
      type: 'create',
      data: {
        handoff_id: id,
        project: 'demo',
        kind: 'task',
        priority: 'medium',
        from_agent: 'alice',
        to_agent: 'bob',
        summary: `work item ${id}`,
        context: {},
        acceptance: {},
        max_retries: 0,
        ...(run !== undefined ? { workflow_run_id: run } : {}),
        idempotency_key: `create:${id}`,
      },
    }),
    step(id, minute + 1, 'bob', 'agent', {
      type: 'claim',
      data: { handoff_id: id, claim_id: `c-${id}`, lease_ms: 60_000, claimer_roles: [], idempotency_key: `claim:${id}` },
    }),
    step(id, minute + 3, 'baton-watchdog', 'watchdog', {
      type: 'requeue_expired',
      data: {
        handoff_id: id,
        claim_id: `c-${id}`,
        escalation_handoff_id: `esc-${id}`,
        ...(lead !== undefined ? { project_lead: lead } : {}),
        idempotency_key: `requeue:c-${id}`,
      },
    }),
  ];
}

async function applyAll(projector: BatonProjector, log: SequencedEvent[]) {
  const outcomes: string[] = [];
  for (const event of log) {
    const result = await projector.apply(event);
    outcomes.push(...Object.values(result).map((r) => r.status));
  }
  return outcomes;
}

async function snapshots(fx: RedisFixture) {
  return Promise.all(PROJECTIONS.map((p) => fx.store.snapshot(p)));
}

describe('Baton projections (real Redis)', () => {
  let fx: RedisFixture;
  let projector: BatonProjector;
  let views: BatonViews;
  const log = envelopes(foldScenario(extendedSteps()));
  const indexOf = (type: string, aggregateId: string) => log.findIndex((e) => e.type === type && e.aggregate.id === aggregateId);

  beforeEach(async () => {
    fx = await redisFixture();
    projector = createBatonProjector({ store: fx.store });
    views = createBatonViews(fx.store);
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('applying the same events twice gives the same snapshot (replays and redeliveries are idempotent)', async () => {
    expect(new Set(await applyAll(projector, log))).toEqual(new Set(['applied']));
    const first = await snapshots(fx);
    // A fresh projector (empty caches, as after a restart) sees every event again.
    const again = await applyAll(createBatonProjector({ store: fx.store }), log);
    expect(new Set(again)).toEqual(new Set(['skipped']));
    const second = await snapshots(fx);
    for (let i = 0; i < PROJECTIONS.length; i++) {
      expect(diffSnapshots(first[i]!, second[i]!)).toEqual([]);
      expect(second[i]!.lastSeq).toBe(log.length);
    }
  });

  it('a rebuild from the stream yields the same snapshot as the live projections', async () => {
    await applyAll(projector, log);
    const live = await snapshots(fx);
    for (const name of PROJECTIONS) {
      const result = await projector.rebuild(name, source(log));
      expect(result.status).toBe('swapped');
    }
    const rebuilt = await snapshots(fx);
    for (let i = 0; i < PROJECTIONS.length; i++) expect(diffSnapshots(live[i]!, rebuilt[i]!)).toEqual([]);
  });

  it('inbox items appear and close per kind: stop on answer, hold on resume, handback on decision, escalation when its consult ends', async () => {
    const cases: Array<{ id: string; opens: number; closes: number; resolution: string }> = [
      { id: 'stop:demo:stop-r-wr-c:res-c1', opens: indexOf('run.stopped', 'wr-c'), closes: indexOf('run.resumed', 'wr-c'), resolution: 'answered:deny' },
      {
        id: `hold:${log[indexOf('run.held', 'wr-b')]!.seq}:demo:wr-b`,
        opens: indexOf('run.held', 'wr-b'),
        closes: indexOf('run.resumed', 'wr-b'),
        resolution: 'answered:terminate',
      },
      {
        id: 'handback:demo:hb-h-2',
        opens: indexOf('handoff.created', 'hb-h-2'),
        closes: indexOf('handoff.handback_decided', 'hb-h-2'),
        resolution: 'decided:accept',
      },
      {
        id: 'escalation:demo:h-3',
        opens: indexOf('handoff.escalated', 'h-3'),
        closes: indexOf('handoff.abandoned', 'esc-h-3'),
        resolution: 'consult_abandoned',
      },
    ];
    const checkpoints = new Set(cases.flatMap((c) => [c.opens - 1, c.opens, c.closes - 1, c.closes]));
    for (let i = 0; i < log.length; i++) {
      await projector.apply(log[i]!);
      if (!checkpoints.has(i)) continue;
      const open = (await views.inbox({ filters: { status: 'open' }, limit: 500 })).items.map((item) => item.id);
      for (const c of cases) {
        const item = await views.inboxItem(c.id);
        if (i < c.opens) expect(item).toBeNull();
        else if (i < c.closes) {
          expect(item).toMatchObject({ status: 'open' });
          expect(open).toContain(c.id);
        } else {
          // A person's answer or handback decision ends an item `answered`; anything else `closed`.
          const status = /^(answered|decided):/.test(c.resolution) ? 'answered' : 'closed';
          expect(item).toMatchObject({ status, resolution: c.resolution });
          expect(open).not.toContain(c.id);
        }
      }
    }
    const stillOpen = (await views.inbox({ filters: { status: 'open' }, limit: 500 })).items.map((i) => i.id).sort();
    expect(stillOpen).toEqual(['handback:demo:hb-h-1', 'stop:demo:stop-r-wr-a:res-a1', 'stop:demo:stop-r-wr-d:res-d1']);
    // Every kind a person answers says with what, read one by one or in a page: a stop its form's
    // buttons, a hold its answers, a handback its decisions; an escalation is answered nowhere.
    const actionsOf = async (id: string) => [(await views.inboxItem(id))?.actions, (await views.inbox({ limit: 500 })).items.find((i) => i.id === id)?.actions];
    expect(await actionsOf(cases[0]!.id)).toEqual([
      ['raise_cap', 'deny'],
      ['raise_cap', 'deny'],
    ]);
    expect(await actionsOf(cases[1]!.id)).toEqual([
      ['continue', 'reroute', 'terminate'],
      ['continue', 'reroute', 'terminate'],
    ]);
    expect(await actionsOf('handback:demo:hb-h-1')).toEqual([
      ['accept', 'rework'],
      ['accept', 'rework'],
    ]);
    expect(await actionsOf(cases[3]!.id)).toEqual([undefined, undefined]);
  });

  it("an escalation with no consult (the project has no lead) stays open until its handoff is archived, in a run or not, when no stop takes it over: nothing else says the failed work was seen (the run's guard_failed stop may never open: a run already finished or stopped)", async () => {
    const at = minuteAt('10');
    const step = handoffStep(at);
    const lapse = (id: string, minute: number, run: string | undefined) => lapsedHandoff(at, id, minute, run);
    const steps = [
      ...lapse('h-run', 1, 'wr-a'),
      ...lapse('h-free', 10, undefined),
      step('h-run', 19, 'olga', 'operator', { type: 'archive', data: { handoff_id: 'h-run', idempotency_key: 'archive:h-run' } }),
      step('h-free', 20, 'olga', 'operator', { type: 'archive', data: { handoff_id: 'h-free', idempotency_key: 'archive:h-free' } }),
    ];
    const events = envelopes(foldScenario(steps));
    expect(events.filter((e) => e.type === 'handoff.escalated').map((e) => (e.payload as { outcome: object }).outcome)).toEqual([
      expect.objectContaining({ stop_why: 'guard_failed' }),
      expect.objectContaining({ stop_why: 'guard_failed' }),
    ]);
    const archived = events.findIndex((e) => e.type === 'handoff.archived');
    await applyAll(projector, events.slice(0, archived));
    expect(await views.inboxItem('escalation:demo:h-run')).toMatchObject({ kind: 'escalation', status: 'open', workflow_run_id: 'wr-a' });
    expect(await views.inboxItem('escalation:demo:h-free')).toMatchObject({ kind: 'escalation', status: 'open' });
    await applyAll(projector, events.slice(archived));
    for (const id of ['escalation:demo:h-run', 'escalation:demo:h-free'])
      expect(await views.inboxItem(id)).toMatchObject({ status: 'closed', resolution: 'archived' });
  });

  it("the guard_failed stop of a run whose handoff was escalated with no consult takes over the escalation's item (superseded_by_stop, the stop names the handoff); with a lead's consult the item stays; an archive later changes neither", async () => {
    const at = minuteAt('11');
    const step = handoffStep(at);
    const start = scenarioSteps()[0];
    if (start.aggregate !== 'run' || start.command.type !== 'start_run') throw new Error('unexpected scenario');
    const { command } = start;
    const startRun = (id: string): ScenarioStep => ({ ...start, id, command: { ...command, data: { ...command.data, workflow_run_id: id } } });
    const lapse = (id: string, minute: number, run: string, lead?: string) => lapsedHandoff(at, id, minute, run, lead);
    // The watchdog's stop request, as the router runs it: the escalated handoff recorded on the stop.
    const stop = (run: string, handoff: string, minute: number, consult?: string): ScenarioStep =>
      ({
        aggregate: 'run',
        id: run,
        actor: 'baton-watchdog',
        origin: 'watchdog',
        command: {
          type: 'stop',
          data: {
            packet_id: `wd-${handoff}`,
            why: 'guard_failed',
            tried: [`handoff ${handoff}: 0 retries after lease_expired`],
            escalation: { project: 'demo', handoff_id: handoff, ...(consult !== undefined ? { consult_handoff_id: consult } : {}) },
          },
          metadata: { now: at(minute), actor: 'baton-watchdog' },
        },
      }) as ScenarioStep;
    const archive = (id: string, minute: number) =>
      step(id, minute, 'olga', 'operator', { type: 'archive', data: { handoff_id: id, idempotency_key: `archive:${id}` } });
    const steps = [
      startRun('wr-x'),
      ...lapse('h-x', 1, 'wr-x'),
      stop('wr-x', 'h-x', 5),
      startRun('wr-y'),
      ...lapse('h-y', 10, 'wr-y', 'lena'),
      stop('wr-y', 'h-y', 15, 'esc-h-y'),
      archive('h-x', 20),
    ];
    const events = envelopes(foldScenario(steps));
    const stopped = events.filter((e) => e.type === 'run.stopped').map((e) => (e.payload as { escalation?: unknown }).escalation);
    expect(stopped).toEqual([
      { project: 'demo', handoff_id: 'h-x' },
      { project: 'demo', handoff_id: 'h-y', consult_handoff_id: 'esc-h-y' },
    ]);
    const archived = events.findIndex((e) => e.type === 'handoff.archived');
    await applyAll(projector, events.slice(0, archived));
    expect(await views.inboxItem('escalation:demo:h-x')).toMatchObject({ status: 'closed', resolution: 'superseded_by_stop', packet_id: 'wd-h-x' });
    expect(await views.inboxItem('stop:demo:wd-h-x')).toMatchObject({ status: 'open', why: 'guard_failed', handoff_id: 'h-x', workflow_run_id: 'wr-x' });
    // The lead was given a consult: that consult's ending closes the escalation, not the stop.
    expect(await views.inboxItem('escalation:demo:h-y')).toMatchObject({ status: 'open', consult_handoff_id: 'esc-h-y' });
    expect(await views.inboxItem('stop:demo:wd-h-y')).toMatchObject({ status: 'open', handoff_id: 'h-y' });
    const closedAt = (await views.inboxItem('escalation:demo:h-x'))?.closed_at;
    await applyAll(projector, events.slice(archived));
    expect(await views.inboxItem('escalation:demo:h-x')).toMatchObject({ status: 'closed', resolution: 'superseded_by_stop', closed_at: closedAt });
    expect(await views.inbox({ filters: { kind: 'escalation', status: 'open' } })).toMatchObject({ items: [{ id: 'escalation:demo:h-y' }] });
    // A rebuild from the stream writes the same.
    const before = await snapshots(fx);
    await projector.rebuildAll(source(events));
    expect((await snapshots(fx)).map((s, i) => diffSnapshots(before[i]!, s))).toEqual(PROJECTIONS.map(() => []));
  });

  it('an offer given up before any claim: the handoff view shows who gave up and the retry it cost; at the retry cap an escalation item opens for the operators (why offer_given_up); a review whose reviewer gave up stays open, marked', async () => {
    const at = minuteAt('12');
    const step = handoffStep(at);
    const giveUp = (id: string, minute: number, agent: string, key: string) =>
      step(id, minute, agent, 'agent', {
        type: 'give_up_offer',
        data: {
          handoff_id: id,
          deliveries: 5,
          reason: 'onOffer failed 5 times: model endpoint down',
          project_lead: 'lena',
          escalation_handoff_id: `esc-${id}`,
          idempotency_key: key,
        },
      });
    const create = (id: string, minute: number, to: string, maxRetries: number) =>
      step(id, minute, 'alice', 'agent', {
        type: 'create',
        data: {
          handoff_id: id,
          project: 'demo',
          kind: 'task',
          priority: 'medium',
          from_agent: 'alice',
          to_agent: to,
          summary: `work item ${id}`,
          context: {},
          acceptance: {},
          max_retries: maxRetries,
          workflow_run_id: 'wr-g',
          idempotency_key: `create:${id}`,
        },
      });
    const steps = [
      create('h-g', 1, 'bob', 1),
      giveUp('h-g', 2, 'bob', 'g1'),
      giveUp('h-g', 4, 'bob', 'g2'),
      create('h-r', 10, 'bob', 3),
      step('h-r', 11, 'bob', 'agent', {
        type: 'claim',
        data: { handoff_id: 'h-r', claim_id: 'c-h-r', lease_ms: 60_000, claimer_roles: [], idempotency_key: 'claim:h-r' },
      }),
      step('h-r', 12, 'bob', 'agent', {
        type: 'return',
        data: {
          handoff_id: 'h-r',
          claim_id: 'c-h-r',
          report: { summary: 'done', files_changed: [], verification: '', next_steps: '', outcome: 'completed', evidence: { tests_run: ['1 passed'] } },
          handback_id: 'hb-h-r',
          roster: { visible_actors: ['alice', 'bob', 'lena'], project_lead: 'lena' },
          idempotency_key: 'return:h-r',
        },
      }),
      giveUp('hb-h-r', 13, 'alice', 'g-hb'),
    ];
    const events = envelopes(foldScenario(steps));
    expect(events.filter((e) => e.aggregate.id === 'h-g').map((e) => e.type)).toEqual(['handoff.created', 'handoff.offer_given_up', 'handoff.escalated']);
    const firstGiveUp = events.findIndex((e) => e.type === 'handoff.offer_given_up');
    await applyAll(projector, events.slice(0, firstGiveUp + 1));
    const pending = await views.handoff('demo', 'h-g');
    expect(pending?.handoff).toMatchObject({ status: 'pending', retry: { retry_count: 1 }, offer_given_up: { by: 'bob', deliveries: 5 } });
    expect(pending?.timeline.at(-1)?.summary).toBe('offer given up by bob unclaimed after 5 deliveries (retry 1): onOffer failed 5 times: model endpoint down');
    expect(await views.inboxItem('escalation:demo:h-g')).toBeNull();

    await applyAll(projector, events.slice(firstGiveUp + 1));
    expect(await views.inboxItem('escalation:demo:h-g')).toMatchObject({
      kind: 'escalation',
      status: 'open',
      why: 'offer_given_up',
      agent: 'lena',
      priority: 'high',
      handoff_id: 'h-g',
      escalate_to: 'lena',
      consult_handoff_id: 'esc-h-g',
      workflow_run_id: 'wr-g',
      note: 'onOffer failed 5 times: model endpoint down',
    });
    expect((await views.handoff('demo', 'h-g'))?.handoff).toMatchObject({
      status: 'failed',
      terminal_reason: 'retry cap 1 reached (offer_given_up); escalated to lena',
    });
    expect(await views.inboxItem('handback:demo:hb-h-r')).toMatchObject({
      kind: 'handback',
      status: 'open',
      handoff_status: 'pending',
      offer_given_up_by: 'alice',
      offer_given_up_reason: 'onOffer failed 5 times: model endpoint down',
    });
    // Idempotent: the same events again change nothing.
    const before = await snapshots(fx);
    expect(new Set(await applyAll(createBatonProjector({ store: fx.store }), events))).toEqual(new Set(['skipped']));
    expect((await snapshots(fx)).map((s, i) => diffSnapshots(before[i]!, s))).toEqual(PROJECTIONS.map(() => []));
  });

  it('inbox filters by project, kind, why, agent and priority; urgent order puts policy stops before medium ones; cursor paging returns each item once', async () => {
    await applyAll(projector, log.slice(0, indexOf('run.resumed', 'wr-b')));
    const policy = await views.inbox({ filters: { why: 'policy' } });
    expect(policy.items.map((i) => i.id)).toEqual(['stop:demo:stop-r-wr-a:res-a1']);
    expect(policy.items[0]).toMatchObject({ kind: 'stop', priority: 'high', urgency: 3, agent: 'issue', has_pending: true, form_kind: 'approve_deny' });
    const stops = await views.inbox({ filters: { kind: 'stop', status: 'open' } });
    expect(stops.items.map((i) => i.id).sort()).toEqual(['stop:demo:stop-r-wr-a:res-a1', 'stop:demo:stop-r-wr-d:res-d1']);
    expect((await views.inbox({ filters: { project: 'other' } })).items).toEqual([]);
    const forAlice = await views.inbox({ filters: { agent: 'alice', kind: 'handback' } });
    expect(forAlice.items.map((i) => i.id).sort()).toEqual(['handback:demo:hb-h-1', 'handback:demo:hb-h-2']);
    const urgent = await views.inbox({ filters: { status: 'open' }, order: 'urgent', limit: 500 });
    const urgencies = urgent.items.map((i) => i.urgency);
    expect(urgencies).toEqual([...urgencies].sort((a, b) => b - a));
    expect(urgent.items.findIndex((i) => i.id === 'stop:demo:stop-r-wr-a:res-a1')).toBeLessThan(
      urgent.items.findIndex((i) => i.id === 'stop:demo:stop-r-wr-d:res-d1'),
    );

    const all = (await views.inbox({ limit: 500 })).items.map((i) => i.id);
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: InboxItem[]; nextCursor: string | null } = await views.inbox({ limit: 2, cursor });
      expect(page.items.length).toBeLessThanOrEqual(2);
      paged.push(...page.items.map((i) => i.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(paged).toEqual(all);
    expect(new Set(paged).size).toBe(paged.length);
  });

  it('the handoff view equals toHandoffRecord of the fold of its events, with one timeline entry per event', async () => {
    await applyAll(projector, log);
    for (const id of ['h-1', 'hb-h-1', 'h-2', 'hb-h-2', 'h-3', 'esc-h-3']) {
      const own = log.filter((e) => e.aggregate.kind === 'handoff' && e.aggregate.id === id);
      const expected = toHandoffRecord(
        fold(
          handoffDecider,
          own.map((e) => ({ type: e.type, data: e.payload }) as HandoffEvent),
        ),
      );
      const view = await views.handoff('demo', id);
      expect(view?.handoff).toEqual(expected);
      expect(view?.timeline.map((t) => t.seq)).toEqual(own.map((e) => e.seq));
      expect(view?.timeline.map((t) => t.type)).toEqual(own.map((e) => e.type));
    }
    expect(await views.handoff('demo', 'nope')).toBeNull();
    expect((await views.runHandoffs('demo', 'wr-a')).map((ref) => `${ref.project}/${ref.id}`)).toEqual(
      expect.arrayContaining(['demo/h-1', 'demo/h-2', 'demo/h-3']),
    );
    expect(await views.runHandoffs('other', 'wr-a')).toEqual([]);
  });

  it('run views show status, current step and agent, hops and the open stop; stop packets are queryable by why, run, status and agent', async () => {
    await applyAll(projector, log);
    const a = await views.run('demo', 'wr-a');
    expect(a?.run).toMatchObject({
      status: 'stopped',
      open_stop_id: 'stop-r-wr-a:res-a1',
      agent: 'issue',
      step: 'triage',
      hops: 1,
      workflow: { name: 'feature', version: 1 },
    });
    expect(a?.timeline.map((t) => t.type)).toEqual(['run.started', 'run.routed', 'run.result_recorded', 'run.stopped', 'run.notice_emitted']);
    // What the agent said on its turn is on the result's line, as the run recorded it (one canonical sentinel).
    const recordedEvent = log.find((e) => e.aggregate.id === 'wr-a' && e.type === 'run.result_recorded');
    const posted = (recordedEvent?.payload as { posted_body?: string } | undefined)?.posted_body;
    expect(posted).toEqual(expect.any(String));
    expect(a?.timeline.find((t) => t.type === 'run.result_recorded')?.said).toBe(posted);
    expect(a?.timeline.filter((t) => t.said !== undefined)).toHaveLength(1);
    expect((await views.run('demo', 'wr-c'))?.run).toMatchObject({ status: 'terminated', open_stop_id: null });
    expect((await views.run('demo', 'wr-b'))?.run).toMatchObject({ status: 'terminated', hold: null });

    const answered = await views.stops({ filters: { status: 'answered' } });
    expect(answered.items.map((r) => r.stop.packet_id)).toEqual(['stop-r-wr-c:res-c1']);
    expect(answered.items[0]).toMatchObject({ stop: { status: 'answered', answer: { action: 'deny', answer_id: 'ans-c1' } }, effect: { kind: 'stop' } });
    expect((await views.stops({ filters: { why: 'unknown_intent' } })).items.map((r) => r.stop.run_id)).toEqual(['wr-d']);
    expect((await views.stops({ run: 'wr-a' })).items.map((r) => r.stop.packet_id)).toEqual(['stop-r-wr-a:res-a1']);
    expect((await views.stops({ run: 'wr-a', filters: { status: 'answered' } })).items).toEqual([]);
    const byTime = (await views.stops({ filters: { agent: 'issue' } })).items.map((r) => r.stop.created_at);
    expect(byTime).toEqual([...byTime].sort().reverse());
    expect((await views.stop('demo', 'stop-r-wr-a:res-a1'))?.stop.pending).toEqual({ name: 'refund', args: { amount: 40, order: 99 } });
  });
});

// Keep the envelope type import used (it documents what the log holds).
export type _LogEvent = SequencedEvent<EventEnvelope>;
