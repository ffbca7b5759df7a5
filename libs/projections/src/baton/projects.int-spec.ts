import { createEventRegistry } from '@baton/contracts';
import type { HandoffCommand } from '@baton/domain';
import { ProjectionVersionError } from '../errors';
import { diffSnapshots } from '../snapshot';
import type { ReplaySource, SequencedEvent } from '../store';
import { redisFixture, type RedisFixture } from '../test-support';
import { NOTICES_STORE, type NoticeItem } from './notices';
import { batonProjections, createBatonProjector, type BatonProjector } from './projector';
import { foldScenario, scenarioEnvelope, scenarioSteps, type ScenarioEvent, type ScenarioStep } from './scenario';
import { createBatonViews, type BatonViews } from './views';

/**
 * Issue 11 / 14: views keyed by project. The same handoff id, workflow_run_id and stop packet id
 * in two projects are two records, each with its own view, claim, timeline and inbox item.
 */

const PROJECTIONS = ['inbox', 'stops', 'handoffs', 'runs', 'notices'];
const at = (minute: number) => new Date(Date.UTC(2026, 0, 2, 9, minute)).toISOString();

/**
 * Project beta: its own run wr-a (stopped on budget by a result of the same id as alpha's, so the
 * same stop packet id), a run wr-beta, handoff h-1 claimed by carol, and an id of its own holding
 * ':' and '@'. The run steps are the scenario's (so they follow the router's rules), changed.
 */
function betaSteps(): ScenarioStep[] {
  const project = 'beta';
  const [startA, resultA, startB] = scenarioSteps({ project }) as [ScenarioStep, ScenarioStep, ScenarioStep];
  if (startA.command.type !== 'start_run' || resultA.command.type !== 'record_result' || startB.command.type !== 'start_run')
    throw new Error('unexpected scenario');
  const people = { started_by: 'pat', issue_author: null, trigger_author: null };
  const { pending_tool_call: _frozen, ...result } = resultA.command.data.result;
  const ho = (id: string, minute: number, actor: string, command: Omit<HandoffCommand, 'metadata'>): ScenarioStep => ({
    aggregate: 'handoff',
    id,
    actor,
    origin: 'agent',
    command: { ...command, metadata: { now: at(minute), actor, actorKind: 'agent' } } as HandoffCommand,
  });
  const create = (id: string, minute: number, workflowRunId: string): ScenarioStep =>
    ho(id, minute, 'dave', {
      type: 'create',
      data: {
        handoff_id: id,
        project,
        kind: 'task',
        priority: 'low',
        from_agent: 'dave',
        to_agent: 'carol',
        summary: `beta item ${id}`,
        context: {},
        acceptance: {},
        max_retries: 3,
        workflow_run_id: workflowRunId,
        idempotency_key: `create:${id}`,
      },
    });
  return [
    { ...startA, command: { ...startA.command, data: { ...startA.command.data, people } } } as ScenarioStep,
    {
      ...resultA,
      command: { ...resultA.command, data: { ...resultA.command.data, result: { ...result, stop: { why: 'budget' }, tried: [{ name: 'lookup' }] } } },
    } as ScenarioStep,
    { ...startB, id: 'wr-beta', command: { ...startB.command, data: { ...startB.command.data, workflow_run_id: 'wr-beta', people } } } as ScenarioStep,
    create('h-1', 3, 'wr-a'),
    ho('h-1', 4, 'carol', {
      type: 'claim',
      data: { handoff_id: 'h-1', claim_id: 'c-beta-h-1', lease_ms: 120_000, claimer_roles: [], idempotency_key: 'claim:beta:h-1' },
    }),
    create('h-3:x@y', 5, 'wr-beta'),
  ];
}

const registry = createEventRegistry();

function envelopes(project: string, events: ScenarioEvent[]): Omit<SequencedEvent, 'seq'>[] {
  return events.map((e, index) => scenarioEnvelope(registry, e, `ev-${project}-${index + 1}`, project));
}

/** Both projects' histories, interleaved one event each, as one stream. */
function interleaved(): SequencedEvent[] {
  const alpha = envelopes('alpha', foldScenario(scenarioSteps({ project: 'alpha' })));
  const beta = envelopes('beta', foldScenario(betaSteps()));
  const out: Omit<SequencedEvent, 'seq'>[] = [];
  for (let i = 0; i < Math.max(alpha.length, beta.length); i++) {
    if (alpha[i]) out.push(alpha[i]!);
    if (beta[i]) out.push(beta[i]!);
  }
  return out.map((event, index) => ({ ...event, seq: index + 1 }) as SequencedEvent);
}

const source =
  (log: SequencedEvent[]): ReplaySource =>
  (fromSeq) =>
    (async function* () {
      for (const event of log) if (event.seq >= fromSeq) yield event;
    })();

describe('projections keyed by project as well as id (real Redis)', () => {
  let fx: RedisFixture;
  let projector: BatonProjector;
  let views: BatonViews;
  const log = interleaved();
  const eventsOf = (project: string, kind: string, id: string) =>
    log.filter((e) => e.project === project && e.aggregate.kind === kind && e.aggregate.id === id);

  async function applyAll(p: BatonProjector): Promise<string[]> {
    const outcomes: string[] = [];
    for (const event of log) outcomes.push(...Object.values(await p.apply(event)).map((r) => r.status));
    return outcomes;
  }

  beforeEach(async () => {
    fx = await redisFixture();
    projector = createBatonProjector({ store: fx.store });
    views = createBatonViews(fx.store);
  });
  afterEach(async () => {
    await fx.cleanup();
  });

  it('the same handoff id in two projects: each project has its own record, claim and timeline', async () => {
    await applyAll(projector);
    const alpha = await views.handoff('alpha', 'h-1');
    const beta = await views.handoff('beta', 'h-1');
    expect(alpha?.handoff).toMatchObject({ id: 'h-1', project: 'alpha', to_agent: 'bob', status: 'returned' });
    expect(beta?.handoff).toMatchObject({ id: 'h-1', project: 'beta', to_agent: 'carol', status: 'claimed', claimed_by: 'carol', claim_id: 'c-beta-h-1' });
    expect(alpha?.timeline.map((t) => t.seq)).toEqual(eventsOf('alpha', 'handoff', 'h-1').map((e) => e.seq));
    expect(beta?.timeline.map((t) => t.seq)).toEqual(eventsOf('beta', 'handoff', 'h-1').map((e) => e.seq));
    expect(beta?.timeline.map((t) => t.type)).toEqual(['handoff.created', 'handoff.claimed']);
    expect(await views.handoff('gamma', 'h-1')).toBeNull();
    expect(await views.handoff('beta', 'h-3:x@y')).toMatchObject({ handoff: { id: 'h-3:x@y', project: 'beta' } });
  });

  it('the same workflow_run_id in two projects: two runs, each with its own view, timeline, handoffs and stop packets', async () => {
    await applyAll(projector);
    const alpha = await views.run('alpha', 'wr-a');
    const beta = await views.run('beta', 'wr-a');
    expect(alpha?.run).toMatchObject({ project: 'alpha', status: 'stopped', open_stop_id: 'stop-r-wr-a:res-a1', people: { started_by: 'sam' } });
    expect(beta?.run).toMatchObject({ project: 'beta', status: 'stopped', open_stop_id: 'stop-r-wr-a:res-a1', people: { started_by: 'pat' } });
    expect(alpha?.timeline.map((t) => t.seq)).toEqual(eventsOf('alpha', 'run', 'wr-a').map((e) => e.seq));
    expect(beta?.timeline.map((t) => t.seq)).toEqual(eventsOf('beta', 'run', 'wr-a').map((e) => e.seq));

    const refs = async (project: string, run: string) => (await views.runHandoffs(project, run)).map((r) => `${r.project}/${r.id}`);
    expect(await refs('alpha', 'wr-a')).toEqual(expect.arrayContaining(['alpha/h-1', 'alpha/h-2', 'alpha/h-3']));
    expect(await refs('alpha', 'wr-a')).not.toContain('beta/h-1');
    expect(await refs('beta', 'wr-a')).toEqual(['beta/h-1']);
    expect(await refs('beta', 'wr-beta')).toEqual(['beta/h-3:x@y']);

    // The same stop packet id (derived from the same result id) in both projects: two packets.
    expect((await views.stop('alpha', 'stop-r-wr-a:res-a1'))?.stop).toMatchObject({ project: 'alpha', why: 'policy' });
    expect((await views.stop('beta', 'stop-r-wr-a:res-a1'))?.stop).toMatchObject({ project: 'beta', why: 'budget' });
    const ofRun = (await views.stops({ run: 'wr-a' })).items.map((r) => `${r.stop.project}/${r.stop.why}`).sort();
    expect(ofRun).toEqual(['alpha/policy', 'beta/budget']);
    expect((await views.stops({ run: 'wr-a', filters: { project: 'beta' } })).items.map((r) => r.stop.why)).toEqual(['budget']);
    expect((await views.stops({ run: 'wr-a', filters: { project: ['gamma'] } })).items).toEqual([]);
  });

  it('inbox items of both projects live side by side: ids hold the project', async () => {
    await applyAll(projector);
    expect(await views.inboxItem('stop:alpha:stop-r-wr-a:res-a1')).toMatchObject({
      project: 'alpha',
      why: 'policy',
      status: 'open',
      packet_id: 'stop-r-wr-a:res-a1',
      workflow_run_id: 'wr-a',
    });
    expect(await views.inboxItem('stop:beta:stop-r-wr-a:res-a1')).toMatchObject({
      project: 'beta',
      why: 'budget',
      status: 'open',
      packet_id: 'stop-r-wr-a:res-a1',
      workflow_run_id: 'wr-a',
    });
    const betaOpen = (await views.inbox({ filters: { project: 'beta', status: 'open' }, limit: 500 })).items.map((i) => i.id);
    expect(betaOpen).toEqual(['stop:beta:stop-r-wr-a:res-a1']);
    const alphaOpen = (await views.inbox({ filters: { project: 'alpha', status: 'open' }, limit: 500 })).items.map((i) => i.id).sort();
    expect(alphaOpen).toEqual(
      [
        'handback:alpha:hb-h-1',
        'hold:' + String(eventsOf('alpha', 'run', 'wr-b').find((e) => e.type === 'run.held')!.seq) + ':alpha:wr-b',
        'stop:alpha:stop-r-wr-a:res-a1',
        'stop:alpha:stop-r-wr-d:res-d1',
        'escalation:alpha:h-3',
      ].sort(),
    );
  });

  it('the same notice id in two projects: two notice items, ids hold the project', async () => {
    await applyAll(projector);
    // Both projects' wr-a stopped on a result res-a1, so both emitted the notice nt-r-wr-a:res-a1.
    const noticeIds = (project: string) =>
      log.filter((e) => e.project === project && e.type === 'run.notice_emitted').map((e) => (e.payload as { notice: { notice_id: string } }).notice.notice_id);
    expect(noticeIds('alpha')).toContain('nt-r-wr-a:res-a1');
    expect(noticeIds('beta')).toContain('nt-r-wr-a:res-a1');
    const notices = fx.store.items<NoticeItem>('notices', NOTICES_STORE);
    expect(await notices.get('alpha:nt-r-wr-a:res-a1')).toMatchObject({
      project: 'alpha',
      notice: { project: 'alpha', notice_id: 'nt-r-wr-a:res-a1', recipient: { handle: 'sam' } },
    });
    expect(await notices.get('beta:nt-r-wr-a:res-a1')).toMatchObject({
      project: 'beta',
      notice: { project: 'beta', notice_id: 'nt-r-wr-a:res-a1', recipient: { handle: 'pat' } },
    });
    expect(await notices.get('nt-r-wr-a:res-a1')).toBeNull();
    // Each project's index holds its own notices, every one of them.
    for (const project of ['alpha', 'beta']) {
      const items = (await notices.query({ filters: { project }, limit: 500 })).items;
      expect(items.map((i) => i.id).sort()).toEqual(
        noticeIds(project)
          .map((id) => `${project}:${id}`)
          .sort(),
      );
      expect(items.every((i) => i.project === project && i.notice.project === project)).toBe(true);
    }
  });

  it('the id lookup names every project holding an id, and only exact ids', async () => {
    await applyAll(projector);
    expect(await views.projectsOf('handoff', 'h-1')).toEqual(['alpha', 'beta']);
    expect(await views.projectsOf('handoff', 'h-2')).toEqual(['alpha']);
    expect(await views.projectsOf('handoff', 'h-3')).toEqual(['alpha']);
    expect(await views.projectsOf('handoff', 'h-3:x@y')).toEqual(['beta']);
    expect(await views.projectsOf('handoff', 'h')).toEqual([]);
    expect(await views.projectsOf('run', 'wr-a')).toEqual(['alpha', 'beta']);
    expect(await views.projectsOf('run', 'wr-beta')).toEqual(['beta']);
    expect(await views.projectsOf('run', 'wr-b')).toEqual(['alpha']);
    expect(await views.projectsOf('stop', 'stop-r-wr-a:res-a1')).toEqual(['alpha', 'beta']);
    expect(await views.projectsOf('stop', 'stop-r-wr-c:res-c1')).toEqual(['alpha']);
    expect(await views.projectsOf('run', 'nope')).toEqual([]);
  });

  it('applying every event twice changes nothing, and a rebuild from the stream equals the live projections', async () => {
    expect(new Set(await applyAll(projector))).toEqual(new Set(['applied']));
    const first = await Promise.all(PROJECTIONS.map((p) => fx.store.snapshot(p)));
    // A fresh projector (no cached states, as after a restart) sees every event again.
    expect(new Set(await applyAll(createBatonProjector({ store: fx.store })))).toEqual(new Set(['skipped']));
    const second = await Promise.all(PROJECTIONS.map((p) => fx.store.snapshot(p)));
    for (let i = 0; i < PROJECTIONS.length; i++) expect(diffSnapshots(first[i]!, second[i]!)).toEqual([]);
    // The keys of both projects' records hold the project.
    const handoffKeys = Object.keys(second[PROJECTIONS.indexOf('handoffs')]!.keys);
    expect(handoffKeys).toEqual(
      expect.arrayContaining(['hs:alpha:h-1', 'hs:beta:h-1', 'ht:alpha:h-1', 'ht:beta:h-1', 'hs:beta:h-3:x@y', 'hr:alpha:wr-a', 'hr:beta:wr-a', 'ids']),
    );
    expect(handoffKeys.filter((k) => k !== 'ids' && !k.startsWith('hq:')).every((k) => /^(hs|ht|hr):(alpha|beta):/.test(k))).toBe(true);
    // The open-status sets are shared by the projects; their members hold the project.
    for (const [key, value] of Object.entries(second[PROJECTIONS.indexOf('handoffs')]!.keys)) {
      if (!key.startsWith('hq:')) continue;
      expect(['hq:pending', 'hq:claimed', 'hq:returned']).toContain(key);
      expect(value.type === 'zset' && value.value.every(([member]) => /^(alpha|beta):/.test(member))).toBe(true);
    }

    await projector.rebuildAll(source(log));
    const rebuilt = await Promise.all(PROJECTIONS.map((p) => fx.store.snapshot(p)));
    for (let i = 0; i < PROJECTIONS.length; i++) expect(diffSnapshots(first[i]!, rebuilt[i]!)).toEqual([]);
  });

  it('a Redis built by the id-only layout (the previous versions) is rebuilt at start: runs, handoffs, stops, inbox and notices changed version', async () => {
    const previous: Record<string, number> = { inbox: 2, stops: 1, handoffs: 1, runs: 1, notices: 1 };
    const old = createBatonProjector({ store: fx.store, projections: batonProjections().map((p) => ({ ...p, version: previous[p.name]! })) });
    await applyAll(old);
    const rebuilt = await projector.ensureCurrent(source(log));
    expect(rebuilt.map((r) => `${r.projection}:${r.reason}`).sort()).toEqual([
      'handoffs:version_changed',
      'inbox:version_changed',
      'notices:version_changed',
      'runs:version_changed',
      'stops:version_changed',
    ]);
    expect(await projector.ensureCurrent(source(log))).toEqual([]);
    expect(await views.handoff('beta', 'h-1')).toMatchObject({ handoff: { project: 'beta', claimed_by: 'carol' } });
  });

  it('projections built from an events stream that is gone (recreated: its sequences started again) are rebuilt from the new one and replace the stale generation', async () => {
    await applyAll(projector);
    expect((await fx.store.status({ name: 'inbox', version: 6 })).lastSeq).toBe(log.at(-1)!.seq);
    // The new stream holds beta's events only, numbered from 1: fewer than the projections applied.
    const recreated = log.filter((e) => e.project === 'beta').map((e, index) => ({ ...e, seq: index + 1 }));
    const last = recreated.at(-1)!.seq;
    expect(last).toBeLessThan(log.at(-1)!.seq);
    const rebuilt = await projector.ensureCurrent(source(recreated), { targetSeq: last }, async () => ({ identity: 'second', lastSeq: last }));
    expect(rebuilt.map((r) => `${r.projection}:${r.reason}:${r.result.status}`).sort()).toEqual(PROJECTIONS.map((p) => `${p}:stream_replaced:swapped`).sort());
    for (const projection of PROJECTIONS) expect((await fx.store.status({ name: projection, version: 0 })).lastSeq).toBe(last);
    expect(await views.projectsOf('run', 'wr-a')).toEqual(['beta']);
    expect(await views.projectsOf('run', 'wr-b')).toEqual([]);
    // Once rebuilt, the same check finds nothing to do.
    expect(await projector.ensureCurrent(source(recreated), { targetSeq: last }, async () => ({ identity: 'second', lastSeq: last }))).toEqual([]);
  });

  it('two releases side by side: an older definition neither applies to nor rebuilds what a newer one built, and a newer one rebuilds what an older one built — never back and forth', async () => {
    const runsVersion = projector.projections.find((p) => p.name === 'runs')!.version;
    const older = createBatonProjector({
      store: fx.store,
      projections: batonProjections().map((p) => (p.name === 'runs' ? { ...p, version: runsVersion - 1 } : p)),
    });
    const cut = Math.floor(log.length / 2);
    const head = log.slice(0, cut);
    const rest = log.slice(cut);
    for (const event of head) await projector.apply(event);
    const built = await fx.store.snapshot('runs');
    expect(await older.newerReleases()).toEqual([{ projection: 'runs', version: runsVersion - 1, storedVersion: runsVersion }]);
    expect(await projector.newerReleases()).toEqual([]);
    // The older release does not rebuild it back to its own version…
    expect(await older.ensureCurrent(source(log))).toEqual([]);
    // Nor does it judge the stream a newer release's generation was built from.
    expect((await older.builtFromAnotherStream(async () => ({ identity: 'other', lastSeq: 1 }))).sort()).toEqual(
      PROJECTIONS.filter((p) => p !== 'runs').sort(),
    );
    // …and the apply script refuses its ops on it, one event or a range: nothing of runs is written.
    const one = await older.apply(rest[0]!).then(
      () => null,
      (error: unknown) => error,
    );
    expect(one).toBeInstanceOf(ProjectionVersionError);
    expect(one).toMatchObject({ projection: 'runs', version: runsVersion - 1, storedVersion: runsVersion, newer: true });
    const range = await older.applyRange({ fromSeq: rest[0]!.seq, toSeq: rest.at(-1)!.seq, events: rest }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(range).toBeInstanceOf(ProjectionVersionError);
    expect(diffSnapshots(built, await fx.store.snapshot('runs'))).toEqual([]);
    expect((await fx.store.status({ name: 'runs', version: 0 })).storedVersion).toBe(runsVersion);
    // The newer release applies the rest as ever.
    for (const event of rest) await projector.apply(event);
    expect((await fx.store.status({ name: 'runs', version: 0 })).lastSeq).toBe(log.at(-1)!.seq);

    // An older release's rebuild swapped in (a rollback's replay): now the newer code's ops are refused…
    expect((await older.rebuild('runs', source(log))).status).toBe('swapped');
    const refused = await projector.applyRange({ fromSeq: log.at(-1)!.seq + 1, toSeq: log.at(-1)!.seq + 1, events: [] }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ name: 'ProjectionVersionError', projection: 'runs', version: runsVersion, storedVersion: runsVersion - 1, newer: false });
    // …and the newer release rebuilds it to its own version, which the older one then leaves alone.
    expect((await projector.ensureCurrent(source(log))).map((r) => `${r.projection}:${r.reason}:${r.result.status}`)).toEqual(['runs:version_changed:swapped']);
    expect(await older.ensureCurrent(source(log))).toEqual([]);
    expect(await projector.ensureCurrent(source(log))).toEqual([]);
    expect((await fx.store.status({ name: 'runs', version: 0 })).storedVersion).toBe(runsVersion);
  });

  it("a recreated events stream that has already passed the old one's sequence is told apart by the identity each generation recorded", async () => {
    await applyAll(projector);
    const old = log.at(-1)!.seq;
    // The first check records the stream the projections were built from; a second finds nothing.
    expect(await projector.builtFromAnotherStream(async () => ({ identity: 'first', lastSeq: old }))).toEqual([]);
    for (const projection of PROJECTIONS) expect((await fx.store.status({ name: projection, version: 0 })).stream).toBe('first');
    expect(await projector.builtFromAnotherStream(async () => ({ identity: 'first', lastSeq: old + 5 }))).toEqual([]);
    // Another stream under the same name, already past the old sequence: only its identity tells.
    const recreated = [...log.filter((e) => e.project === 'beta'), ...log].map((e, index) => ({ ...e, seq: index + 1 }));
    const last = recreated.at(-1)!.seq;
    expect(last).toBeGreaterThan(old);
    const mark = async () => ({ identity: 'second', lastSeq: last });
    const rebuilt = await projector.ensureCurrent(source(recreated), { targetSeq: last }, mark);
    expect(rebuilt.map((r) => `${r.projection}:${r.reason}:${r.result.status}`).sort()).toEqual(PROJECTIONS.map((p) => `${p}:stream_replaced:swapped`).sort());
    for (const projection of PROJECTIONS) expect((await fx.store.status({ name: projection, version: 0 })).lastSeq).toBe(last);
    // The new generations record the new stream at the next check, and are left alone from then on.
    expect(await projector.ensureCurrent(source(recreated), { targetSeq: last }, mark)).toEqual([]);
    for (const projection of PROJECTIONS) expect((await fx.store.status({ name: projection, version: 0 })).stream).toBe('second');
    expect(await projector.ensureCurrent(source(recreated), { targetSeq: last }, mark)).toEqual([]);
  });
});
