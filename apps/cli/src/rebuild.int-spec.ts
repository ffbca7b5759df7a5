import { readdirSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { getPriority } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, batonTopology, connectNats, eventHeaders, headersFrom, provision, type NatsHandle } from '@baton/eventstore';
import {
  batonProjections,
  createBatonProjector,
  createProjectionStore,
  createRedis,
  foldScenario,
  jetStreamReplaySource,
  scenarioEnvelope,
  scenarioSteps,
  type ProjectionSnapshot,
  type ProjectionStore,
  type RedisHandle,
} from '@baton/projections';
import { createCliContext } from './context';
import type { Command } from './command';
import { replayCommand } from './commands/replay';
import { verifyCommand } from './commands/verify';
import { execute, main } from './main';
import { bufferedIo } from './output';
import { tapped } from './tapped-source.int-support';

/*
 * Issue 12: a rebuild interrupted (Ctrl-C) or killed half-way leaves the live projections as they
 * were, serving; running it again succeeds, and what a killed rebuild left behind is deleted once
 * its lease runs out.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const encoder = new TextEncoder();

/** Append the example scenario once per project (`p0`, `p1`...; from `p<firstProject>`) until `count` events are stored. */
async function fill(nats: NatsHandle, prefix: string, count: number, firstProject = 0): Promise<void> {
  const registry = createEventRegistry();
  const template = foldScenario(scenarioSteps({ project: 'zzz' }));
  const inFlight = new Set<Promise<unknown>>();
  let n = 0;
  for (let p = firstProject; n < count; p++) {
    const project = `p${p}`;
    for (const [index, e] of template.entries()) {
      if (n++ >= count) break;
      // As the event store stores it, in this project (the template's project key swapped).
      const stored = scenarioEnvelope(registry, e, `ev-${index}`, project);
      const envelope = { ...stored, payload: JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as unknown };
      const ack = nats.js
        .publish(Subjects.aggregate(prefix, project, e.aggregate, e.id), encoder.encode(JSON.stringify(envelope)), {
          msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
          headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
        })
        .finally(() => inFlight.delete(ack));
      inFlight.add(ack);
      if (inFlight.size >= 256) await Promise.race(inFlight);
    }
  }
  await Promise.all(inFlight);
}

/**
 * A projection store whose rebuilds read through `real`'s source, calling `at` once just before the
 * event of sequence `seq` goes on (where a test sends its signal).
 */
function onEvent(real: ProjectionStore, seq: number, at: () => void): Pick<ProjectionStore, 'rebuildMany'> {
  let done = false;
  return {
    rebuildMany: ((targets, source, options) =>
      real.rebuildMany(
        targets,
        tapped(source, {
          each: (event) => {
            if (event.seq === seq && !done) {
              done = true;
              at();
            }
          },
        }),
        options,
      )) as ProjectionStore['rebuildMany'],
  };
}

describe('interrupted and killed rebuilds (real NATS and Redis)', () => {
  let nats: NatsHandle;
  let redis: RedisHandle;
  let prefix: string;
  let store: ProjectionStore;
  const env = () => ({ NATS_URL, REDIS_URL, BATON_PREFIX: prefix });

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: env() });
    return { code, out: io.out(), err: io.err() };
  }

  async function snapshots(): Promise<Record<string, ProjectionSnapshot>> {
    const out: Record<string, ProjectionSnapshot> = {};
    for (const p of batonProjections()) out[p.name] = await store.snapshot(p.name);
    return out;
  }

  async function generations(): Promise<string[]> {
    const found = new Set<string>();
    for await (const batch of redis.client.scanStream({ match: `${prefix}:proj:*:g*`, count: 1000 })) {
      for (const key of batch as string[]) {
        const [name, generation] = key.split(':').slice(2, 4);
        if (/^g\d+$/.test(generation ?? '')) found.add(`${name}:${generation}`);
      }
    }
    return [...found].sort();
  }

  /**
   * `baton replay` as the built CLI in its own process (bin/baton.js builds it first when the
   * sources are newer), BATON_REBUILD_NICE unset, once every projection's shadow holds part of the
   * stream. `stdout`: piped, or ignored.
   */
  async function replayUnderWay(stdout: 'pipe' | 'ignore') {
    const { BATON_REBUILD_NICE: _unset, ...inherited } = process.env;
    const child = spawn(process.execPath, [join(__dirname, '..', '..', '..', 'bin', 'baton.js'), 'replay'], {
      env: { ...inherited, ...env() },
      stdio: ['ignore', stdout, 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    for (let i = 0; ; i++) {
      const running = await Promise.all(batonProjections().map((p) => store.rebuilds(p.name)));
      if (running.every((r) => r.length === 1 && (r[0]?.seq ?? 0) > 0)) break;
      if (i > 1_200) throw new Error(`the child rebuild never got going: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { child, exited };
  }

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-rebuild-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    // The test's own reads wait behind the rebuild's bulk scripts: on a loaded machine longer than
    // a service's 1 s command timeout (a CI run failed so, 'Command timed out').
    redis = createRedis(REDIS_URL, { commandTimeout: 15_000 });
    store = createProjectionStore({ redis: redis.client, prefix: `${prefix}:proj` });
  });

  afterEach(async () => {
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      const keys = batch as string[];
      if (keys.length > 0) await redis.client.unlink(...keys);
    }
    await redis.close();
    await nats.close();
  });

  it('Ctrl-C half-way through baton replay: exit 130, nothing swapped, the shadows deleted, the live projections unchanged; replay again succeeds', async () => {
    await fill(nats, prefix, 1_500);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    const live = await generations();
    const io = bufferedIo();
    const ctx = createCliContext({ io, env: env(), nats, redis });
    const real = await ctx.projections();
    let interrupted = false;
    // Ctrl-C arrives once 600 events were read (the command's own SIGINT handler aborts the rebuild).
    const interrupting: ProjectionStore = Object.assign(
      Object.create(real) as ProjectionStore,
      onEvent(real, 600, () => {
        interrupted = true;
        process.emit('SIGINT', 'SIGINT');
      }),
    );
    ctx.projections = async () => interrupting;
    let code: number;
    try {
      code = await execute(replayCommand, [], ctx);
    } finally {
      await ctx.close();
    }
    expect(interrupted).toBe(true);
    expect(code).toBe(130);
    expect(io.err()).toContain('SIGINT: stopping the rebuild; the live projections are not touched');
    expect(io.err()).toContain('interrupted; nothing was swapped in and the shadow generations were deleted');
    expect(io.out()).toBe('');
    expect(process.listenerCount('SIGINT')).toBe(0);
    expect(await generations()).toEqual(live);
    expect(await snapshots()).toEqual(before);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
    const again = await baton('replay', '--json');
    expect(again.code).toBe(0);
    expect((JSON.parse(again.out) as Array<{ status: string }>).every((o) => o.status === 'swapped')).toBe(true);
    for (const [name, snapshot] of Object.entries(await snapshots())) expect(snapshot.keys).toEqual(before[name]?.keys);
  });

  /** Run `command` with a projection store whose rebuilds go through `wrap` (where the test sends its Ctrl-C). */
  async function runWith(command: Command, argv: string[], wrap: (real: ProjectionStore) => Partial<ProjectionStore>) {
    const io = bufferedIo();
    const ctx = createCliContext({ io, env: env(), nats, redis });
    const real = await ctx.projections();
    const store = Object.assign(Object.create(real) as ProjectionStore, wrap(real));
    ctx.projections = async () => store;
    try {
      return { code: await execute(command, argv, ctx), io };
    } finally {
      await ctx.close();
    }
  }

  it('Ctrl-C while baton replay and baton verify are still connecting (before the first event): said, exit 130, nothing changed', async () => {
    await fill(nats, prefix, 50);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    for (const command of [replayCommand, verifyCommand]) {
      const io = bufferedIo();
      const ctx = createCliContext({ io, env: env(), nats, redis });
      const real = ctx.projections.bind(ctx);
      // The signal comes while the projections are being reached (seconds on a busy deployment).
      ctx.projections = async () => {
        process.emit('SIGINT', 'SIGINT');
        return real();
      };
      let code: number;
      try {
        code = await execute(command, [], ctx);
      } finally {
        await ctx.close();
      }
      expect({ command: command.name, code }).toEqual({ command: command.name, code: 130 });
      expect(io.err()).toContain('SIGINT: stopping the');
      expect(io.err()).toMatch(/interrupted before the (rebuild|verification) began; nothing was changed/);
      expect(process.listenerCount('SIGINT')).toBe(0);
    }
    expect(await snapshots()).toEqual(before);
  });

  it('Ctrl-C after the last event was folded, before the swaps: still exit 130, nothing swapped, the live projections unchanged', async () => {
    await fill(nats, prefix, 600);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    const live = await generations();
    const { code, io } = await runWith(replayCommand, [], (real) => ({
      rebuildMany: ((targets, source, options) =>
        real.rebuildMany(
          targets,
          // The stream is read to its end: the signal comes while the last chunk is written.
          tapped(source, { end: () => process.emit('SIGINT', 'SIGINT') }),
          options,
        )) as ProjectionStore['rebuildMany'],
    }));
    expect(code).toBe(130);
    expect(io.err()).toContain('interrupted; nothing was swapped in');
    expect(io.out()).toBe('');
    expect(await generations()).toEqual(live);
    expect(await snapshots()).toEqual(before);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
  });

  it('a hang-up (SIGHUP, sent twice as a closing session may) half-way through baton replay: stopped like Ctrl-C, not killed; exit 130, the shadows deleted, the live projections unchanged', async () => {
    await fill(nats, prefix, 1_200);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    const live = await generations();
    let hungUp = false;
    const { code, io } = await runWith(replayCommand, [], (real) =>
      onEvent(real, 500, () => {
        hungUp = true;
        // The second is not "again: exit now" (that would end this test's process).
        process.emit('SIGHUP', 'SIGHUP');
        process.emit('SIGHUP', 'SIGHUP');
      }),
    );
    expect(hungUp).toBe(true);
    expect(code).toBe(130);
    expect(io.err()).toContain('SIGHUP: stopping the rebuild; the live projections are not touched (SIGINT or SIGTERM to exit at once)');
    expect(io.err()).toContain('interrupted; nothing was swapped in and the shadow generations were deleted');
    expect(process.listenerCount('SIGHUP')).toBe(0);
    expect(await generations()).toEqual(live);
    expect(await snapshots()).toEqual(before);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
  });

  it('baton replay in its own process, its terminal gone (output pipes closed, then SIGHUP): it cleans up and exits 130 instead of dying with its shadows left', async () => {
    await fill(nats, prefix, 25_000);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    const live = await generations();
    const { child, exited } = await replayUnderWay('pipe');
    // Run as its own process, it yields the CPU to the live services (BATON_REBUILD_NICE unset: 10).
    expect(getPriority(child.pid)).toBe(10);
    // Every thread of it, not the main thread alone (V8's and libuv's threads too; nice is per thread on Linux).
    const tasks = readdirSync(`/proc/${child.pid}/task`).map(Number);
    expect(tasks.length).toBeGreaterThan(1);
    expect(tasks.map((tid) => ({ tid, nice: getPriority(tid) }))).toEqual(tasks.map((tid) => ({ tid, nice: 10 })));
    // Whatever it writes from now on fails (EPIPE here; EIO on a real hung-up terminal).
    child.stdout?.destroy();
    child.stderr?.destroy();
    child.kill('SIGHUP');
    expect(await exited).toBe(130);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
    expect(await generations()).toEqual(live);
    expect(await snapshots()).toEqual(before);
  }, 240_000);

  it('a second Ctrl-C during the swaps exits at once and says which projections are swapped in already (details.swapped): exit 130 no longer reads as nothing swapped', async () => {
    await fill(nats, prefix, 600);
    expect((await baton('replay')).code).toBe(0);
    const exits: unknown[] = [];
    const exit = jest.spyOn(process, 'exit').mockImplementation(((code?: number) => {
      exits.push(code);
    }) as never);
    const swapped: string[] = [];
    try {
      const { io } = await runWith(replayCommand, ['--json'], (real) => ({
        rebuildMany: ((targets, source, options) =>
          real.rebuildMany(targets, source, {
            ...options,
            onSwapped: (projection, generation) => {
              options?.onSwapped?.(projection, generation);
              swapped.push(projection);
              if (swapped.length !== 2) return;
              process.emit('SIGINT', 'SIGINT');
              process.emit('SIGINT', 'SIGINT');
            },
          })) as ProjectionStore['rebuildMany'],
      }));
      expect(exits).toEqual([130]);
      const failure = io
        .err()
        .split('\n')
        .filter((line) => line.startsWith('{"error"'))
        .map((line) => JSON.parse(line) as { error: { code: string; message: string; details: { swapped: string[] } } })[0];
      expect(failure?.error.code).toBe('interrupted');
      expect(failure?.error.details.swapped).toEqual(swapped.slice(0, 2));
      expect(failure?.error.message).toContain(`during the swap: swapped in ${swapped.slice(0, 2).join(', ')}, the others not`);
    } finally {
      exit.mockRestore();
    }
  });

  it('Ctrl-C once the swaps began: the rebuild finishes and says so (exit 0, every projection swapped; with --json stderr holds no prose: the notice is its JSON warnings line)', async () => {
    await fill(nats, prefix, 600);
    expect((await baton('replay')).code).toBe(0);
    const live = await generations();
    const { code, io } = await runWith(replayCommand, ['--json'], (real) => ({
      rebuildMany: ((targets, source, options) =>
        real.rebuildMany(targets, source, {
          ...options,
          onSwapping: () => {
            options?.onSwapping?.();
            process.emit('SIGINT', 'SIGINT');
          },
        })) as ProjectionStore['rebuildMany'],
    }));
    expect(code).toBe(0);
    // With --json no prose and no progress: the notice is the one JSON warnings line, after the outcomes.
    expect(io.err()).toMatch(/^[^\n]+\n$/);
    expect(JSON.parse(io.err())).toEqual({
      warnings: [{ code: 'signal', message: 'SIGINT: the rebuild is already swapping its projections in; it finishes (SIGINT again to exit at once)' }],
    });
    const outcomes = JSON.parse(io.out()) as Array<{ status: string; generation: number; projection: string }>;
    expect(outcomes.map((o) => o.status)).toEqual(batonProjections().map(() => 'swapped'));
    expect(await generations()).not.toEqual(live);
    expect(process.listenerCount('SIGINT')).toBe(0);
  });

  it('a live generation written by another release of the notifier (another definition version): verify says so, replay refuses (projection_version_mismatch) and rebuilds only with --allow-version-change', async () => {
    await fill(nats, prefix, 300);
    expect((await baton('replay')).code).toBe(0);
    const handoffs = batonProjections().find((p) => p.name === 'handoffs')!;
    const before = await store.status(handoffs);
    const generation = before.activeGeneration!;
    // As a notifier of the previous release would have written it, and with one state it lacks.
    const base = `${prefix}:proj:handoffs:g${generation}`;
    await redis.client.hset(`${base}:~meta`, 'version', String(handoffs.version - 1));
    const [state] = (await redis.client.keys(`${base}:hs:*`)).sort();
    await redis.client.del(state!);

    const verified = await baton('verify', '--projection', 'handoffs');
    expect(verified.code).toBe(1);
    expect(verified.out).toContain(`note: the live handoffs is version ${handoffs.version - 1}, this baton folds version ${handoffs.version}`);
    expect(verified.out).toContain('written by another release of the notifier');
    expect(verified.out).not.toContain('run `baton replay`');
    const json = JSON.parse((await baton('verify', '--projection', 'handoffs', '--json')).out) as { projections: Array<Record<string, unknown>> };
    expect(json.projections[0]).toMatchObject({ projection: 'handoffs', version: handoffs.version, live_version: handoffs.version - 1, differing: 1 });

    const refused = await baton('replay', '--projection', 'handoffs', '--json');
    expect(refused.code).toBe(1);
    const failure = JSON.parse(refused.err.trim().split('\n').at(-1)!) as { error: { code: string; details: unknown } };
    expect(failure.error).toMatchObject({
      code: 'projection_version_mismatch',
      details: { projections: [{ projection: 'handoffs', version: handoffs.version, live_version: handoffs.version - 1 }] },
    });
    expect(await store.status(handoffs)).toMatchObject({ activeGeneration: generation, storedVersion: handoffs.version - 1 });
    // The other projections are at this baton's version: rebuilt as ever.
    expect((await baton('replay', '--projection', 'inbox')).code).toBe(0);

    expect((await baton('replay', '--projection', 'handoffs', '--allow-version-change')).code).toBe(0);
    const after = await store.status(handoffs);
    expect(after.activeGeneration).not.toBe(generation);
    expect(after.storedVersion).toBe(handoffs.version);
    expect((await baton('verify')).code).toBe(0);
  });

  it('Ctrl-C after the last comparison of baton verify: exit 130 and no verdict', async () => {
    await fill(nats, prefix, 300);
    expect((await baton('replay')).code).toBe(0);
    let compared = 0;
    const { code, io } = await runWith(verifyCommand, ['--json'], (real) => ({
      compare: (async (...args: Parameters<ProjectionStore['compare']>) => {
        const result = await real.compare(...args);
        if (++compared === batonProjections().length) process.emit('SIGINT', 'SIGINT');
        return result;
      }) as ProjectionStore['compare'],
    }));
    expect(compared).toBe(batonProjections().length);
    expect(code).toBe(130);
    // With --json the interruption is the command's one JSON failure line, the signal's notice in its details.warnings.
    const failure = JSON.parse(io.err()) as { error: { code: string; message: string } };
    expect(failure.error).toMatchObject({
      code: 'interrupted',
      message: expect.stringContaining('nothing live was touched'),
      details: { warnings: [{ code: 'signal', message: expect.stringContaining('SIGINT: stopping the verification; the live projections are not touched') }] },
    });
    expect(io.out()).toBe('');
  });

  it('Ctrl-C during a catch-up round of baton verify (the live projections moved on while it compared): exit 130, no verdict, the scratch generations deleted', async () => {
    await fill(nats, prefix, 300);
    expect((await baton('replay')).code).toBe(0);
    const live = await generations();
    let moved = false;
    let caughtUp = 0;
    const { code, io } = await runWith(verifyCommand, ['--json'], (real) => ({
      // The live side applies 40 more events while the first projection is compared: every one moves on.
      compare: (async (...args: Parameters<ProjectionStore['compare']>) => {
        if (!moved) {
          moved = true;
          await fill(nats, prefix, 40, 1_000);
          const projector = createBatonProjector({ store });
          for await (const event of jetStreamReplaySource({ nats, prefix, registry: createEventRegistry() })(301)) await projector.apply(event);
        }
        return real.compare(...args);
      }) as ProjectionStore['compare'],
      // Ctrl-C once the catch-up pass reads its first event.
      buildScratch: ((targets, source, options) =>
        real.buildScratch(
          targets,
          tapped(source, {
            each: (_event, from) => {
              if (from > 1 && caughtUp++ === 0) process.emit('SIGINT', 'SIGINT');
            },
          }),
          options,
        )) as ProjectionStore['buildScratch'],
    }));
    expect(caughtUp).toBeGreaterThan(0);
    expect(code).toBe(130);
    const failure = JSON.parse(io.err()) as { error: { code: string; message: string } };
    expect(failure.error).toMatchObject({ code: 'interrupted', message: expect.stringContaining('the scratch generations were deleted') });
    expect(io.out()).toBe('');
    expect(await generations()).toEqual(live);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
    expect(process.listenerCount('SIGINT')).toBe(0);
  });

  it("baton replay killed (SIGKILL) half-way: the live projections keep serving unchanged; replay again succeeds; the dead rebuild's shadow is deleted once its lease runs out", async () => {
    await fill(nats, prefix, 25_000);
    expect((await baton('replay')).code).toBe(0);
    const before = await snapshots();
    const live = await generations();
    // Killed once every projection's shadow holds part of the stream.
    const { child, exited } = await replayUnderWay('ignore');
    child.kill('SIGKILL');
    await exited;
    const left = await Promise.all(batonProjections().map(async (p) => (await store.rebuilds(p.name))[0]));
    for (const rebuild of left) expect(rebuild).toMatchObject({ kind: 'rebuild', by: 'baton replay', stale: false });
    expect((left[0]?.seq ?? 0) < 25_000).toBe(true);
    // The live generations are the same ones, whole, and serve reads.
    expect((await generations()).filter((g) => live.includes(g))).toEqual(live);
    expect(await snapshots()).toEqual(before);
    // Running it again succeeds (the dead rebuild's shadows are not in its way).
    const again = await baton('replay', '--json');
    expect(again.code).toBe(0);
    expect((JSON.parse(again.out) as Array<{ status: string }>).every((o) => o.status === 'swapped')).toBe(true);
    for (const [name, snapshot] of Object.entries(await snapshots())) expect(snapshot.keys).toEqual(before[name]?.keys);
    expect((await baton('verify')).code).toBe(0);
    // Once the dead rebuild's lease has run out (here: moved into the past), it shows as stale and
    // the next rebuild (or the notifier's periodic check) deletes its shadows.
    for (const [i, p] of batonProjections().entries()) {
      const key = `${prefix}:proj:${p.name}:rebuilds`;
      const field = String(left[i]?.generation);
      const raw = await redis.client.hget(key, field);
      // On a slow machine the lease may have run out during the replay and verify above, and the
      // replay deleted the dead rebuild's shadow already: what is checked below holds either way.
      if (raw === null) continue;
      const entry = JSON.parse(raw) as Record<string, unknown>;
      await redis.client.hset(key, field, JSON.stringify({ ...entry, leaseUntil: Date.now() - 1 }));
      expect((await store.rebuilds(p.name))[0]).toMatchObject({ stale: true });
    }
    expect((await baton('replay')).code).toBe(0);
    for (const p of batonProjections()) expect(await store.rebuilds(p.name)).toEqual([]);
    expect((await generations()).length).toBe(batonProjections().length);
  }, 240_000);
});
