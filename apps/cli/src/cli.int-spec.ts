import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEventRegistry, generateJsonSchemas, type EventEnvelope } from '@baton/contracts';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import {
  batonProjections,
  createBatonProjector,
  createProjectionStore,
  createRedis,
  jetStreamReplaySource,
  MEMBER_FREEZE_MIN,
  type FreezeLimits,
  type ProjectionSnapshot,
  type ProjectionStore,
  type RedisHandle,
} from '@baton/projections';
import { schemaFileText } from './commands/schemas';
import { verifyCommand } from './commands/verify';
import type { ShadowComparison } from './rebuild';
import { createCliContext } from './context';
import { failureOf, main } from './main';
import { bufferedIo } from './output';
import { tapped } from './tapped-source.int-support';
import { waitFor } from '@baton/wait';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const PROJECT = 'demo';
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();

describe('the baton command against real NATS and Redis', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  const registry = createEventRegistry();

  /** The bodies of this describe's tests that have not ended yet. */
  const underWay = new Set<Promise<unknown>>();
  /**
   * This describe's `it`: Jest's, with the test's body kept in {@link underWay} until it ends. A
   * test past its timeout runs on (Jest cannot stop it) and may still write keys — the live traffic
   * of a verify test, say — so afterEach waits for its end before it removes the test's keys.
   */
  const it = (name: string, body: () => Promise<void>, timeoutMs?: number): void =>
    globalThis.it(
      name,
      () => {
        const run = body();
        underWay.add(run);
        const ended = () => void underWay.delete(run);
        void run.then(ended, ended);
        return run;
      },
      timeoutMs,
    );

  /** Run `baton <argv>` in-process; returns the exit code and what it printed. */
  async function baton(...argv: Array<string | Record<string, string>>) {
    const io = bufferedIo();
    // A trailing object is extra environment for this call.
    const extra = typeof argv.at(-1) === 'object' ? (argv.pop() as Record<string, string>) : {};
    const code = await main(argv as string[], { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix, ...extra } });
    return { code, out: io.out(), err: io.err() };
  }

  function handoffEvent(id: string, seq: number, type: string, payload: Record<string, unknown>): EventEnvelope {
    return {
      id: `${id}-ev-${seq}`,
      type,
      version: registry.currentVersion(type),
      aggregate: { kind: 'handoff', id },
      project: PROJECT,
      occurredAt: iso(seq),
      actor: 'tester',
      origin: 'agent',
      causationId: null,
      correlationId: id,
      payload,
    };
  }

  const created = (id: string, s: number, extra: Record<string, unknown> = {}) =>
    handoffEvent(id, s, 'handoff.created', {
      handoff_id: id,
      at: iso(s),
      idempotency_key: `create-${id}`,
      project: PROJECT,
      kind: 'task',
      priority: 'high',
      from_agent: 'planner',
      to_agent: 'coder',
      summary: `build ${id}`,
      context: {},
      acceptance: {},
      max_retries: 3,
      workflow_run_id: 'wr-1',
      ...extra,
    });

  /** The completion handback `id` of planner's review of coder's work on h-0. */
  const reviewOfH0 = (id: string, s: number, summary: string) =>
    created(id, s, {
      kind: 'completion_handback',
      priority: 'medium',
      from_agent: 'coder',
      to_agent: 'planner',
      reply_to_handoff_id: 'h-0',
      reviewed_worker: 'coder',
      summary,
    });

  /** Write a few handoff events to the events stream and apply them live, as the notifier does. */
  async function seed(): Promise<void> {
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    await events.append({ project: PROJECT, kind: 'handoff', id: 'h-1' }, [created('h-1', 1)], { expectedVersion: 0 });
    const claimed = handoffEvent('h-1', 2, 'handoff.claimed', {
      handoff_id: 'h-1',
      at: iso(2),
      idempotency_key: 'claim-h-1',
      claimed_by: 'coder',
      claim_id: 'c-1',
      lease_expires_at: iso(62),
    });
    const first = await events.read({ project: PROJECT, kind: 'handoff', id: 'h-1' });
    await events.append({ project: PROJECT, kind: 'handoff', id: 'h-1' }, [claimed], { expectedVersion: first.lastSeq });
    await events.append(
      { project: PROJECT, kind: 'handoff', id: 'h-2' },
      [created('h-2', 3, { priority: 'low', to_agent: 'tester', deadline_at: iso(86_400) })],
      { expectedVersion: 0 },
    );
    const handback = reviewOfH0('hb-1', 4, 'review the work on h-0');
    await events.append({ project: PROJECT, kind: 'handoff', id: 'hb-1' }, [handback], { expectedVersion: 0 });
    const projector = createBatonProjector({ store });
    for await (const event of jetStreamReplaySource({ nats, prefix, registry })(1)) await projector.apply(event);
  }

  async function snapshots(): Promise<Record<string, ProjectionSnapshot['keys']>> {
    const out: Record<string, ProjectionSnapshot['keys']> = {};
    for (const p of batonProjections()) out[p.name] = (await store.snapshot(p.name)).keys;
    return out;
  }

  async function keysMatching(pattern: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const batch of redis.client.scanStream({ match: pattern, count: 500 })) keys.push(...(batch as string[]));
    return keys;
  }

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    redis = createRedis(REDIS_URL);
    await redis.ping();
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
    await seed();
  });

  afterEach(async () => {
    try {
      // The test's traffic ends before its keys go: a key written after the removal would stay
      // behind (16 keys of the h-bulk test once did, its body running on past its timeout).
      await waitFor(() => underWay.size === 0, 'the body of the test to end', { timeoutMs: 60_000 });
      const keys = await keysMatching(`${prefix}:*`);
      if (keys.length > 0) await redis.client.unlink(...keys);
      expect(await keysMatching(`${prefix}:*`)).toEqual([]);
    } finally {
      const names = batonStreamNames(prefix);
      for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      await redis.close();
      await nats.drain();
    }
  }, 90_000);

  it('inbox --json prints a JSON array of the open inbox items, read from the projections', async () => {
    const { code, out } = await baton('inbox', '--json');
    expect(code).toBe(0);
    const items = JSON.parse(out) as { id: string; kind: string; status: string }[];
    expect(Array.isArray(items)).toBe(true);
    expect(items).toEqual([expect.objectContaining({ id: 'handback:demo:hb-1', kind: 'handback', status: 'open', project: PROJECT })]);
    expect(JSON.parse((await baton('inbox', '--json', '--kind', 'stop')).out)).toEqual([]);

    const table = await baton('inbox');
    expect(table.code).toBe(0);
    expect(table.out).toMatch(/^ID\s+KIND\s+PROJECT/);
    expect(table.out).toContain('handback:demo:hb-1');
  });

  it('the inbox table prints an item id whole, however long, so that it can be copied into the next command', async () => {
    const long = `hb-${'review-the-work-on-the-checkout-flow-'.repeat(3)}1`;
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    const handback = reviewOfH0(long, 5, 'review it');
    await events.append({ project: PROJECT, kind: 'handoff', id: long }, [handback], { expectedVersion: 0 });
    expect((await baton('replay', '--projection', 'inbox')).code).toBe(0);
    const table = await baton('inbox');
    expect(table.code).toBe(0);
    expect(table.out).toContain(`handback:${PROJECT}:${long} `);
    expect(table.out).not.toMatch(/^handback:\S*…/m);
  });

  it('inbox and stops page alike: a bad cursor is a usage error, stops --json is a JSON array, a table with nothing to show says so', async () => {
    const bad = await baton('inbox', '--cursor', 'not-a-cursor');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--cursor');
    expect((await baton('stops', '--cursor', 'not-a-cursor')).code).toBe(2);
    const stops = await baton('stops', '--json', '--why', 'policy,budget');
    expect(stops.code).toBe(0);
    expect(JSON.parse(stops.out)).toEqual([]);
    expect((await baton('stops')).out).toContain('no stop packets');
    expect((await baton('inbox', '--limit', '0')).code).toBe(2);
    // --json-page: one object a script pages with, the cursor included.
    const page = await baton('inbox', '--json-page', '--limit', '1', '--status', 'any');
    expect(page.code).toBe(0);
    const first = JSON.parse(page.out) as { items: unknown[]; next_cursor: string | null };
    expect(first.items).toHaveLength(1);
    expect(typeof first.next_cursor === 'string' || first.next_cursor === null).toBe(true);
    if (first.next_cursor !== null)
      expect(JSON.parse((await baton('inbox', '--json-page', '--status', 'any', '--cursor', first.next_cursor)).out)).toHaveProperty('items');
  });

  it("the NATS client's own error (a connection closed under a command) is unavailable, not a failed NatsError", async () => {
    const handle = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222' });
    await handle.close();
    let thrown: unknown;
    try {
      handle.connection.publish('baton-cli-test.closed', new Uint8Array());
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(failureOf(thrown)).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/^NATS: .*\(CONNECTION_CLOSED\); is the server up/) });
  });

  it('Redis that stops answering under a command (past REDIS_COMMAND_TIMEOUT_MS) is unavailable, naming the setting, not a failed "Error: Command timed out"', async () => {
    // A command that waits longer than the client's timeout (a blocking pop on a key nobody pushes to).
    const slow = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { commandTimeout: 50 });
    let thrown: unknown;
    try {
      await slow.client.blpop(`baton-cli-test-${process.pid}:never`, 1);
    } catch (error) {
      thrown = error;
    } finally {
      await slow.close();
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(failureOf(thrown)).toMatchObject({
      code: 'unavailable',
      message: expect.stringMatching(/^Redis did not answer: .*Command timed out.*REDIS_COMMAND_TIMEOUT_MS/),
    });
  });

  it('with --json a missing record is a typed failure on stderr (not_found), stdout empty', async () => {
    const missing = await baton('handoff', 'no-such-handoff', '--json');
    expect({ code: missing.code, out: missing.out }).toEqual({ code: 1, out: '' });
    expect(JSON.parse(missing.err)).toMatchObject({ error: { code: 'not_found', message: expect.stringContaining('no-such-handoff') } });
  });

  it('a filter value the API would refuse is a usage error naming the values it takes, not an empty list', async () => {
    const status = await baton('inbox', '--status', 'bogus');
    expect({ code: status.code, out: status.out }).toEqual({ code: 2, out: '' });
    expect(status.err).toContain('--status takes open, answered, closed, any, all; got "bogus"');
    // With --json every failure is one JSON line on stderr, with a code a script branches on.
    const typed = await baton('inbox', '--status', 'bogus', '--json');
    expect(JSON.parse(typed.err)).toEqual({ error: { code: 'usage', message: expect.stringContaining('got "bogus"'), issues: [] } });
    expect((await baton('inbox', '--kind', 'stop,nope')).err).toContain('--kind takes stop, hold, handback, escalation; got "nope"');
    expect((await baton('inbox', '--priority', 'HIGH')).code).toBe(2);
    const why = await baton('inbox', '--why', 'polcy');
    expect(why.code).toBe(2);
    expect(why.err).toMatch(/--why takes .*policy.*human_gate.*lease_expired.*; got "polcy"/);
    expect((await baton('inbox', '--why', 'policy,hold,rework', '--json')).code).toBe(0);
    expect((await baton('stops', '--why', 'policy,whim')).err).toContain('got "whim"');
    expect((await baton('stops', '--status', 'closed')).code).toBe(2);
    expect((await baton('inbox', '--status', 'open,answered', '--json')).code).toBe(0);
    // `any` (= `all`) is both statuses, as GET /v1/stops takes it: the same list as no filter.
    const everyStop = await baton('stops', '--json');
    for (const any of ['any', 'all', 'open,any']) {
      const listed = await baton('stops', '--status', any, '--json');
      expect({ code: listed.code, out: listed.out }).toEqual({ code: 0, out: everyStop.out });
    }
  });

  it('handoff <id> reads the timeline straight from the stream, and still works when the projections are gone', async () => {
    // The text view shows what bounds the handoff: its deadline (and a lease while claimed).
    const text = await baton('handoff', 'h-2');
    expect(text.out).toMatch(new RegExp(`^deadline: +${iso(86_400).replace(/[.]/g, '\\.')}$`, 'm'));
    const live = await baton('handoff', 'h-1', '--json');
    expect(live.code).toBe(0);
    expect(JSON.parse(live.out)).toMatchObject({
      view_source: 'projection',
      timeline_source: 'stream',
      handoff: { id: 'h-1', status: 'claimed', claimed_by: 'coder' },
      timeline: [{ type: 'handoff.created' }, { type: 'handoff.claimed' }],
    });
    await redis.client.unlink(...(await keysMatching(`${prefix}:proj:*`)));
    const gone = await baton('handoff', 'h-1', '--json');
    expect(gone.code).toBe(0);
    expect(JSON.parse(gone.out)).toMatchObject({ view_source: 'events', handoff: { id: 'h-1', status: 'claimed' }, timeline: [{ seq: 1 }, { seq: 2 }] });
    expect((await baton('handoff', 'nope')).code).toBe(1);
  });

  it('replay after deleting the projection keys restores an identical snapshot (shadow build, atomic swap)', async () => {
    const before = await snapshots();
    expect(Object.keys(before['handoffs']!).length).toBeGreaterThan(0);
    await redis.client.unlink(...(await keysMatching(`${prefix}:proj:*`)));
    expect(Object.values(await snapshots()).every((keys) => Object.keys(keys).length === 0)).toBe(true);

    const { code, out, err } = await baton('replay');
    expect(code).toBe(0);
    expect(out).toMatch(/handoffs: rebuilt generation \d+ from 4 events/);
    // Progress and the summary go to stderr: events done / total, the rate, the time left.
    expect(err).toMatch(/replay: 4\/4 events {2}100 % {2}[\d ]+\/s/);
    expect(err).toMatch(/replay: 4 events in \d+ s \([\d ]+\/s\); inbox, stops, handoffs, runs, notices rebuilt/);
    expect(await snapshots()).toEqual(before);
  });

  it('verify exits 0 when the projections equal a fold of the stream, and 1 with the diff after one key is corrupted', async () => {
    const clean = await baton('verify');
    expect(clean.code).toBe(0);
    expect(clean.out).toMatch(/handoffs: ok/);

    const generation = await store.activeGeneration('handoffs');
    await redis.client.set(`${prefix}:proj:handoffs:g${generation}:hs:demo:h-2`, '{"id":"h-2","status":"tampered"}');
    const dirty = await baton('verify');
    expect(dirty.code).toBe(1);
    expect(dirty.out).toMatch(/handoffs: 1 keys differ/);
    expect(dirty.out).toContain('hs:demo:h-2');
    expect(dirty.out).toContain('tampered');
    const json = await baton('verify', '--projection', 'handoffs', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, projections: [{ projection: 'handoffs', differences: [{ key: 'hs:demo:h-2' }] }] });

    // A dry-run replay reports the same difference (exit 1, as verify) and changes nothing; the scratch generation is dropped.
    const dry = await baton('replay', '--dry-run', '--projection', 'handoffs');
    expect(dry.code).toBe(1);
    expect(dry.out).toMatch(/1 keys differ/);
    expect((await baton('verify', '--projection', 'handoffs')).code).toBe(1);
    const generations = new Set((await keysMatching(`${prefix}:proj:handoffs:g[0-9]*`)).map((k) => k.split(':')[3]));
    expect([...generations]).toEqual([`g${generation}`]);

    expect((await baton('replay', '--projection', 'handoffs')).code).toBe(0);
    expect((await baton('verify')).code).toBe(0);
    expect((await baton('replay', '--dry-run', '--projection', 'handoffs')).code).toBe(0);
    // Nine commands, each of which SCANs the whole (shared) Redis keyspace a few times per
    // projection: past 20 s on a Redis holding a few hundred thousand keys of other tests.
  }, 60_000);

  it('replay --dry-run past what the live projection applied says so under its differences (the live side behind, not wrong); verify, at the applied sequence, finds none', async () => {
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    // Stored, not applied: the live projection is behind the stream by one event.
    await events.append({ project: PROJECT, kind: 'handoff', id: 'h-behind' }, [created('h-behind', 50)], { expectedVersion: 0 });
    const dry = await baton('replay', '--dry-run', '--projection', 'handoffs');
    expect(dry.code).toBe(1);
    expect(dry.out).toMatch(/handoffs: dry run folded \d+ events to seq (\d+) .*at seq (\d+)/);
    expect(dry.out).toContain('the live projection behind, not a lasting one');
    expect((await baton('verify', '--projection', 'handoffs')).code).toBe(0);
  });

  it('verify counts a projection that has no live generation (never built, another BATON_PROJECTION_PREFIX) as a difference, and writes nothing under that keyspace', async () => {
    const elsewhere = `${prefix}-elsewhere:proj`;
    const missing = await baton('verify', '--projection', 'notices', '--json', { BATON_PROJECTION_PREFIX: elsewhere });
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.out)).toMatchObject({ ok: false, projections: [{ projection: 'notices', missing: true, live_generation: null }] });
    const text = await baton('verify', '--projection', 'notices', { BATON_PROJECTION_PREFIX: elsewhere });
    expect(text.out).toMatch(/notices: no live generation, while the stream holds \d+ events/);
    expect(text.err).toMatch(/1 projections have no live generation/);
    expect(await keysMatching(`${prefix}-elsewhere:*`)).toEqual([]);
  });

  it('inbox and stops under a keyspace with no projection say so on stderr (a wrong prefix is not an empty inbox; with --json as the JSON line {"warnings":[…]}, code projection_not_built); built ones say nothing', async () => {
    const elsewhere = `${prefix}-elsewhere:proj`;
    for (const command of ['inbox', 'stops']) {
      const typed = await baton(command, '--json', { BATON_PROJECTION_PREFIX: elsewhere });
      expect({ code: typed.code, out: JSON.parse(typed.out) as unknown }).toEqual({ code: 0, out: [] });
      expect(typed.err).toMatch(/^[^\n]+\n$/);
      expect(JSON.parse(typed.err)).toEqual({
        warnings: [
          {
            code: 'projection_not_built',
            message: expect.stringContaining(`no ${command} projection under "${elsewhere}" in Redis at ${REDIS_URL}`),
            details: { projection: command, prefix: elsewhere, redis_url: REDIS_URL },
          },
        ],
      });
      const wrong = await baton(command, { BATON_PROJECTION_PREFIX: elsewhere });
      expect(wrong.code).toBe(0);
      expect(wrong.err).toContain(
        `warning: no ${command} projection under "${elsewhere}" in Redis at ${REDIS_URL}: never built, BATON_PREFIX / BATON_PROJECTION_PREFIX names another keyspace, or this is not the platform's Redis`,
      );
      expect(wrong.err).toContain(`baton replay --projection ${command}`);
      // Built (even when what it lists is empty for these filters): no warning.
      const right = await baton(command, '--project', 'nobody-here');
      expect(right.code).toBe(0);
      expect(right.err).toBe('');
    }
    expect(await keysMatching(`${prefix}-elsewhere:*`)).toEqual([]);
  });

  /** Live traffic: a heartbeat of h-1's claim, or a new handoff (keys no earlier event wrote). */
  type LiveEvent = 'beat' | 'create';
  let liveEvents = 0;

  /** Append one event to the stream and apply it to the live projections, as the ledger and the notifier do. */
  async function applyLive(kind: LiveEvent): Promise<void> {
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    const s = 100 + ++liveEvents;
    const id = kind === 'beat' ? 'h-1' : `h-live-${s}`;
    const event =
      kind === 'beat'
        ? handoffEvent(id, s, 'handoff.heartbeat', { handoff_id: id, at: iso(s), idempotency_key: `beat-${s}`, claim_id: 'c-1', lease_expires_at: iso(s + 60) })
        : created(id, s);
    const ref = { project: PROJECT, kind: 'handoff' as const, id };
    await events.append(ref, [event], { expectedVersion: (await events.read(ref)).lastSeq });
    await createBatonProjector({ store }).apply((await events.read(ref)).events.at(-1)!);
  }

  /**
   * `baton verify <argv>` on a busy deployment: the live side applies `traffic.fold` once the fold
   * has read its first event, and before each comparison of handoffs `traffic.compare` (a whole
   * comparison) or `traffic.compareKeys` (a catch-up round's). Also says where each pass began to
   * read the stream, and how many comparisons of each kind handoffs had.
   */
  async function verifyUnderTraffic(
    argv: string[],
    traffic: { fold?: LiveEvent[]; compare?: LiveEvent[]; compareKeys?: LiveEvent[] },
    { refuseFreezing = false, freezeLimits }: { refuseFreezing?: boolean; freezeLimits?: FreezeLimits } = {},
  ) {
    const io = bufferedIo();
    const ctx = createCliContext({ io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    const real = await ctx.projections();
    const reads: number[] = [];
    const comparisons = { compare: 0, compareKeys: 0, compareFrozen: 0 };
    /** `real[method]`, counted and preceded by `events` applied live when it compares handoffs. */
    const busyBefore = <M extends keyof typeof comparisons>(method: M, events: readonly LiveEvent[] = []) =>
      (async (projection: string, ...rest: unknown[]) => {
        if (projection === 'handoffs') {
          comparisons[method]++;
          for (const kind of events) await applyLive(kind);
        }
        return (real[method] as (...args: unknown[]) => Promise<unknown>).call(real, projection, ...rest);
      }) as ProjectionStore[M];
    const busy: ProjectionStore = Object.assign(Object.create(real) as ProjectionStore, {
      buildScratch: ((targets, source, options) =>
        real.buildScratch(
          targets,
          (from) => {
            reads.push(from);
            let first = from === 1;
            return tapped(source, {
              each: async () => {
                if (first) for (const kind of traffic.fold ?? []) await applyLive(kind);
                first = false;
              },
            })(from);
          },
          refuseFreezing && options?.afterPass
            ? {
                ...options,
                // Differing keys too many or too large to copy at once: the rounds compare the live keys themselves.
                afterPass: (pass) => options.afterPass!({ ...pass, freeze: async (_, keys) => ({ status: 'too_large', keys: keys.length, elements: 0 }) }),
              }
            : freezeLimits && options?.afterPass
              ? { ...options, afterPass: (pass) => options.afterPass!({ ...pass, freeze: (projection, keys) => pass.freeze(projection, keys, freezeLimits) }) }
              : options,
        )) as ProjectionStore['buildScratch'],
      compare: busyBefore('compare', traffic.compare),
      compareKeys: busyBefore('compareKeys', traffic.compareKeys),
      compareFrozen: busyBefore('compareFrozen', traffic.compareKeys),
    });
    ctx.projections = async () => busy;
    try {
      const code = await verifyCommand.run(argv, ctx);
      return { code, out: io.out(), err: io.err(), reads, comparisons };
    } finally {
      await ctx.close();
    }
  }

  type VerifyJson = { ok: boolean; projections: Array<ShadowComparison> };

  it('verify under steady live traffic (events applied during the fold and during every comparison) catches up with the live projection instead of starting over, and reaches a verdict: no differences', async () => {
    // h-1 heartbeats during the fold and the first comparison; while the catch-up round compares,
    // another handoff is created: that comparison reads copies taken before it, which nothing moves.
    const traffic = { fold: ['beat', 'beat'], compare: ['beat'], compareKeys: ['create'] } satisfies Parameters<typeof verifyUnderTraffic>[1];
    const busy = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], traffic);
    expect(busy.code).toBe(0);
    const report = JSON.parse(busy.out) as VerifyJson;
    expect(report.ok).toBe(true);
    // Folded to seq 4 (what the live projection had applied), compared while it applied 5..7; the
    // keys that differed (h-1's) copied from the live side at 7; the fold caught up to 7 from 5 (not
    // from 1) and compared with the copies while the live side applied 8.
    expect(report.projections[0]).toMatchObject({
      projection: 'handoffs',
      live_seq: 7,
      rebuilt_seq: 7,
      events: 7,
      differing: 0,
      rounds: 1,
      live_moved: 0,
      unsettled: 0,
      frozen_keys: 2,
    });
    expect(busy.reads).toEqual([1, 5]);
    expect(busy.comparisons).toEqual({ compare: 1, compareKeys: 0, compareFrozen: 1 });
    // Counted whole again at the end (the catch-up round compared a few keys only).
    const generation = (await store.activeGeneration('handoffs'))!;
    expect(report.projections[0]!.live_keys).toBe(Object.keys((await store.snapshot('handoffs', generation)).keys).length);
    expect(report.projections[0]!.rebuilt_keys).toBeGreaterThan(0);

    const text = await verifyUnderTraffic(['--projection', 'handoffs'], traffic);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/^handoffs: ok \(\d+ keys, seq 11, after 1 catch-up rounds with the live projection\)$/m);
    expect(text.err).toContain('(comparing with the live projections)');
    expect(text.err).toContain('(catching up with the live projections, round 1)');
    expect(text.err).toContain('(comparing the differing keys at one sequence (round 1))');
    expect(text.err).toMatch(/verify: 1[0-9] events in [^;]+; every projection matches the stream/);
    // Nothing left behind: the scratch generation and its copies of live keys are gone.
    expect(new Set((await keysMatching(`${prefix}:proj:handoffs:g[0-9]*`)).map((k) => k.split(':')[3]))).toEqual(new Set([`g${generation}`]));
  });

  it('verify under live traffic still reports real drift (a value changed by hand, a key deleted) after its catch-up round, as lasting', async () => {
    const generation = await store.activeGeneration('handoffs');
    await redis.client.set(`${prefix}:proj:handoffs:g${generation}:hs:demo:h-2`, '{"id":"h-2","status":"tampered"}');
    await redis.client.del(`${prefix}:proj:handoffs:g${generation}:ht:demo:hb-1`);
    const traffic = { fold: ['beat', 'beat'], compare: ['beat'], compareKeys: ['create'] } satisfies Parameters<typeof verifyUnderTraffic>[1];
    const busy = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], traffic);
    expect(busy.code).toBe(1);
    const report = JSON.parse(busy.out) as VerifyJson;
    expect(report.ok).toBe(false);
    // Round 1 compared h-1's keys (the live side's newer events, now folded too) and the two drifted
    // keys, all four as they stood at seq 7: only the drifted two differ.
    expect(report.projections[0]).toMatchObject({ differing: 2, rounds: 1, live_seq: 7, live_moved: 0, unsettled: 0, unsettled_keys: [], frozen_keys: 4 });
    expect(report.projections[0]!.differences.map((d) => [d.key, d.a !== undefined, d.b !== undefined])).toEqual([
      ['hs:demo:h-2', true, true],
      ['ht:demo:hb-1', false, true],
    ]);
    expect(busy.reads).toEqual([1, 5]);

    const text = await verifyUnderTraffic(['--projection', 'handoffs'], traffic);
    expect(text.code).toBe(1);
    expect(text.out).toContain('handoffs: 2 keys differ from a fold of the stream (to seq 11):');
    expect(text.out).toContain('tampered');
    expect(text.out).toContain(
      '  note: compared at seq 11 with the 4 live keys that had differed, copied as they stood then (the live projection kept applying events): these differences are lasting',
    );
    expect(text.out).toContain('projections differ; run `baton replay` to rebuild them');
  });

  it('verify under traffic that writes a differing key during every comparison reaches an exact verdict in one catch-up round: those keys are compared as they stood at one sequence', async () => {
    const busy = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], { compare: ['beat'], compareKeys: ['beat'] });
    expect(busy.code).toBe(0);
    const report = JSON.parse(busy.out) as VerifyJson;
    expect(report.projections[0]).toMatchObject({ differing: 0, rounds: 1, live_moved: 0, unsettled: 0, frozen_keys: 2 });
    expect(busy.comparisons).toEqual({ compare: 1, compareKeys: 0, compareFrozen: 1 });
    expect(busy.reads).toHaveLength(2);
  });

  it('verify whose differing keys are too many or too large to copy at once compares the live keys round after round, and when a differing key is written during every comparison, says after its last round which differences may be those events (unsettled)', async () => {
    const traffic = { compare: ['beat'], compareKeys: ['beat'] } satisfies Parameters<typeof verifyUnderTraffic>[1];
    const busy = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], traffic, { refuseFreezing: true });
    expect(busy.code).toBe(1);
    const report = JSON.parse(busy.out) as VerifyJson;
    expect(report.projections[0]).toMatchObject({
      differing: 2,
      rounds: 9,
      live_moved: 1,
      unsettled: 2,
      unsettled_keys: ['hs:demo:h-1', 'ht:demo:h-1'],
      frozen_keys: 0,
    });
    // One whole comparison, then the catch-up rounds: 9 comparing what changed, the 10th (the last) only telling which differences are newer events.
    expect(busy.comparisons).toEqual({ compare: 1, compareKeys: 9, compareFrozen: 0 });
    expect(busy.reads).toHaveLength(11);

    const text = await verifyUnderTraffic(['--projection', 'handoffs'], traffic, { refuseFreezing: true });
    expect(text.code).toBe(1);
    expect(text.out).toMatch(
      /note: handoffs applied 1 more events while it was compared \(after seq \d+\); 2 of the differing keys \(hs:demo:h-1, ht:demo:h-1\) may be those events, not lasting ones: compare again when its traffic is quieter/,
    );
    expect(text.out).toContain('every difference may be events applied while it was compared: run `baton verify` again when traffic is quieter');
    expect(text.out).not.toContain('run `baton replay`');
  });

  it('verify under traffic that keeps changing an index key larger than a whole copy may be (every handoff of a run) freezes only its differing members: an exact verdict in one round, and a lasting drift on one member is reported with both sides of that member', async () => {
    // 1 100 more handoffs of run wr-1: its index (hr:demo:wr-1), the id lookup and the pending set
    // each hold over MEMBER_FREEZE_MIN members. The bound is lowered to 1 000 elements so that
    // copying one of them whole is refused, as a 50 000-element index is under the default bound.
    const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    for (let i = 0; i < 1_100; i += 100)
      await Promise.all(
        Array.from({ length: 100 }, (_, k) => {
          const id = `h-bulk-${i + k}`;
          return events.append({ project: PROJECT, kind: 'handoff', id }, [created(id, 10)], { expectedVersion: 0 });
        }),
      );
    const projector = createBatonProjector({ store });
    for await (const event of jetStreamReplaySource({ nats, prefix, registry })(5)) await projector.apply(event);
    const generation = (await store.activeGeneration('handoffs'))!;
    const index = `${prefix}:proj:handoffs:g${generation}:hr:demo:wr-1`;
    expect(await redis.client.zcard(index)).toBeGreaterThan(MEMBER_FREEZE_MIN);
    const freezeLimits = { keys: 10_000, elements: 1_000 };
    // A new handoff of wr-1 during the fold, during the first comparison and during the catch-up round's.
    const traffic = { fold: ['create'], compare: ['create'], compareKeys: ['create'] } satisfies Parameters<typeof verifyUnderTraffic>[1];
    const busy = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], traffic, { freezeLimits });
    expect(busy.code).toBe(0);
    const report = JSON.parse(busy.out) as VerifyJson;
    expect(report.projections[0]).toMatchObject({ differing: 0, rounds: 1, live_moved: 0, unsettled: 0 });
    // hr:demo:wr-1, the id lookup and hq:pending member by member (the two handoffs created after the
    // fold's bound: two new members each), those handoffs' own keys (state, timeline) whole.
    expect(report.projections[0]).toMatchObject({ frozen_keys: 7, frozen_members: 6 });
    expect(busy.comparisons).toEqual({ compare: 1, compareKeys: 0, compareFrozen: 1 });

    // Drift no event explains on one member of that index: lasting, reported member by member.
    const seq = Number(await redis.client.zscore(index, 'demo:h-bulk-7'));
    await redis.client.zadd(index, 424_242, 'demo:h-bulk-7');
    const drifted = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], traffic, { freezeLimits });
    expect(drifted.code).toBe(1);
    const found = (JSON.parse(drifted.out) as VerifyJson).projections[0]!;
    expect(found).toMatchObject({ differing: 1, rounds: 1, live_moved: 0, unsettled: 0, unsettled_keys: [], frozen_keys: 7, frozen_members: 7 });
    expect(found.differences).toEqual([
      {
        key: 'hr:demo:wr-1',
        a: { type: 'zset', value: [['demo:h-bulk-7', 424_242]] },
        b: { type: 'zset', value: [['demo:h-bulk-7', seq]] },
        differing_members: 1,
      },
    ]);

    const text = await verifyUnderTraffic(['--projection', 'handoffs'], traffic, { freezeLimits });
    expect(text.code).toBe(1);
    expect(text.out).toContain('handoffs: 1 keys differ from a fold of the stream');
    expect(text.out).toContain(`  hr:demo:wr-1 (zset compared member by member; 1 member differs)\n    "demo:h-bulk-7": live 424242, rebuilt ${seq}\n`);
    expect(text.out).toMatch(/note: compared at seq \d+ with the 7 live keys that had differed \(of the large ones, the 7 members that had differed\)/);
  });

  it('verify while the live projection applies events as fast as they come (the same keys again and again, concurrently with the fold and every comparison) ends with an exact verdict, and finds drift made before it started', async () => {
    let stop = false;
    let applied = 0;
    const traffic = (async () => {
      while (!stop) {
        await applyLive('beat');
        applied++;
      }
    })();
    try {
      await waitFor(async () => applied >= 3, 'live traffic under way');
      // A verify may end before the loop's next apply does (a quiet, fast machine): verify again,
      // each verdict checked, until one ran while the live side applied events (at most 5 times).
      const verifyWhileApplied = async (check: (run: { code: number; out: string }) => void) => {
        for (let attempt = 1; ; attempt++) {
          const before = applied;
          const run = await verifyUnderTraffic(['--projection', 'handoffs', '--json'], {});
          check(run);
          if (applied > before || attempt === 5) return applied - before;
        }
      };
      // The live side applied events while it ran.
      expect(
        await verifyWhileApplied((calm) => {
          expect(JSON.parse(calm.out)).toMatchObject({ ok: true, projections: [{ differing: 0, unsettled: 0 }] });
          expect(calm.code).toBe(0);
        }),
      ).toBeGreaterThan(0);
      const generation = await store.activeGeneration('handoffs');
      await redis.client.set(`${prefix}:proj:handoffs:g${generation}:hs:demo:h-2`, '{"id":"h-2","status":"tampered"}');
      expect(
        await verifyWhileApplied((drifted) => {
          const report = JSON.parse(drifted.out) as VerifyJson;
          expect(report.projections[0]).toMatchObject({ differing: 1, unsettled: 0, differences: [{ key: 'hs:demo:h-2' }] });
          expect(drifted.code).toBe(1);
        }),
      ).toBeGreaterThan(0);
    } finally {
      stop = true;
      await traffic;
    }
  });

  it('schemas writes one pretty-printed file per contract, equal to generateJsonSchemas()', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'baton-schemas-'));
    try {
      const { code } = await baton('schemas', '--out', dir);
      expect(code).toBe(0);
      const expected = generateJsonSchemas();
      expect((await readdir(dir)).sort()).toEqual(
        Object.keys(expected)
          .map((n) => `${n}.json`)
          .sort(),
      );
      for (const [name, schema] of Object.entries(expected)) {
        const text = await readFile(join(dir, `${name}.json`), 'utf8');
        expect(text).toBe(schemaFileText(schema));
        expect(text.endsWith('}\n')).toBe(true);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('usage mistakes exit 2 with the usage; --help exits 0', async () => {
    expect((await baton('frobnicate')).code).toBe(2);
    // An empty id names nothing: a usage error, not a request for a route that does not exist.
    for (const argv of [
      ['answer', '', '--action', 'deny'],
      ['handoff', ' '],
      ['run', ''],
    ]) {
      const empty = await baton(...argv);
      expect({ argv, code: empty.code }).toEqual({ argv, code: 2 });
      expect(empty.err).toContain('an argument is empty');
    }
    const bad = await baton('inbox', '--bogus');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('Usage: baton inbox');
    expect((await baton('verify', '--projection', 'nope')).code).toBe(2);
    expect((await baton('decide', 'h-1', 'maybe')).code).toBe(2);
    const help = await baton('replay', '--help');
    expect(help.code).toBe(0);
    expect(help.out).toContain('--dry-run');
    expect((await baton('help')).out).toContain('baton <command>');
  });
});
