import type { RunningService } from '@baton/platform';
import { batonProjections } from '@baton/projections';
import { HealthReadySchema, ProjectionsResponseSchema } from '../api/schemas';
import { startFixture, startRun, type NotifierFixture } from '../web/console-fixture.int-support';
import { startNotifier } from '../main';
import { captureNotifierLog, countNotices, scenarioStream } from './scenario-stream.int-support';
import { projectionPrefix } from './tokens';

/*
 * Two releases of the notifier side by side (a rolling upgrade): a projection's definition version
 * only grows from one release to the next. This notifier plays the older release: a newer release's
 * rebuild is simulated by raising the version its active generation records — which is all that
 * tells a newer generation apart. It must stand back (apply, rebuild and publish nothing; not
 * ready) rather than rebuild the projection back to its own version, as it did before; and it must
 * rebuild a projection an older release built. Real NATS and Redis.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const runsVersion = batonProjections().find((p) => p.name === 'runs')!.version;
let fx: NotifierFixture;
let log: ReturnType<typeof captureNotifierLog>;
/** The notifier the last test starts in place of the fixture's (which `fx.close` does not know of). */
let restarted: RunningService | undefined;

beforeAll(async () => {
  log = captureNotifierLog();
  // Checks every 200 ms: a standing-back notifier that rebuilt at its checks would show it at once.
  fx = await startFixture({ NOTIFIER_PROJECTION_CHECK_MS: '200', LOG_LEVEL: 'info' });
  await startRun(fx.events, 'alpha', 'wr-1');
  await startRun(fx.events, 'alpha', 'wr-2');
  await fx.caughtUp();
}, 60_000);

afterAll(async () => {
  await restarted?.stop();
  await fx?.close();
  log?.restore();
});

/** The notifier's log lines (from the `from`th on) whose message starts with `start`. */
const logged = (start: string, from = 0) =>
  log.lines
    .slice(from)
    .map((line) => JSON.parse(line) as { msg: string; level: string; projections?: string; projection?: string; reason?: string })
    .filter((l) => l.msg.startsWith(start));

async function runsMeta(): Promise<{ key: string; generation: string }> {
  const base = `${projectionPrefix(fx.prefix)}:runs`;
  const generation = (await fx.redis.client.get(`${base}:active`)) as string;
  return { key: `${base}:g${generation}:~meta`, generation };
}

async function ready(): Promise<{ status: number; body: ReturnType<typeof HealthReadySchema.parse> }> {
  const response = await fetch(`${fx.base}/health/ready`);
  return { status: response.status, body: HealthReadySchema.parse(await response.json()) };
}

async function until<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

it('a projection a newer release built: the notifier stands back — applies, rebuilds and publishes nothing, not ready — and resumes once the projection is of its version again', async () => {
  expect((await ready()).status).toBe(200);
  const meta = await runsMeta();
  const stoodAt = await fx.redis.client.hget(meta.key, 'seq');
  const mark = log.lines.length;
  // A newer release's rebuild swapped in; then an event arrives.
  await fx.redis.client.hset(meta.key, 'version', String(runsVersion + 1));
  await startRun(fx.events, 'alpha', 'wr-3');
  const notReady = await until('not ready', async () => {
    const answer = await ready();
    return answer.status === 503 ? answer : null;
  });
  expect(notReady.body.checks).toMatchObject({ projection_versions: false, nats: true });
  const details = notReady.body.details as { projections: { standing_back: unknown } };
  expect(details.projections.standing_back).toEqual({
    reason: 'newer_release',
    since: expect.any(String),
    projections: [{ projection: 'runs', version: runsVersion, stored_version: runsVersion + 1 }],
  });
  const token = await fx.token('sre', 'viewer', '*');
  const report = await fetch(`${fx.base}/v1/projections`, { headers: { authorization: `Bearer ${token}` } });
  expect(ProjectionsResponseSchema.parse(await report.json())).toMatchObject({ standing_back: { reason: 'newer_release' } });

  // More events and many checks later: runs is neither rebuilt (same generation, version) nor applied to.
  await startRun(fx.events, 'alpha', 'wr-4');
  await sleep(1_500);
  expect(await runsMeta()).toEqual(meta);
  expect(await fx.redis.client.hmget(meta.key, 'version', 'seq')).toEqual([String(runsVersion + 1), stoodAt]);
  expect((await ready()).status).toBe(503);

  // Redis loses runs meanwhile: it is the newer release's to rebuild, not this notifier's (which
  // would rebuild it at its own version, and the newer notifiers back again).
  const runsActive = `${projectionPrefix(fx.prefix)}:runs:active`;
  await fx.redis.client.del(runsActive);
  await sleep(1_000);
  expect(await fx.redis.client.get(runsActive)).toBeNull();
  expect((await ready()).status).toBe(503);
  await fx.redis.client.set(runsActive, meta.generation);

  // A rollback rebuilt runs to this release's version: the notifier resumes by itself and catches up.
  await fx.redis.client.hset(meta.key, 'version', String(runsVersion));
  await until('ready again', async () => ((await ready()).status === 200 ? true : null));
  await fx.caughtUp(15_000);
  const resumed = await ready();
  expect((resumed.body.details as { projections: { standing_back: unknown } }).projections.standing_back).toBeNull();
  // Said once at error, however many checks found it standing back; its resumption once.
  expect(logged('a newer release of the notifier built these projections')).toEqual([
    expect.objectContaining({ level: 'error', projections: `runs@${runsVersion + 1}>${runsVersion}` }),
  ]);
  expect(logged('no projection is of a newer release any more')).toHaveLength(1);
  expect(logged('projection', mark).filter((l) => / rebuilt|rebuilt /.test(l.msg))).toEqual([]);
  const wr4 = await fetch(`${fx.base}/v1/projects/alpha/runs/wr-4`, { headers: { authorization: `Bearer ${token}` } });
  expect(wr4.status).toBe(200);
}, 60_000);

it('a projection an older release built (a rollback replay while this release runs): the notifier rebuilds it to its own version', async () => {
  const meta = await runsMeta();
  await fx.redis.client.hset(meta.key, 'version', String(runsVersion - 1));
  await startRun(fx.events, 'alpha', 'wr-5');
  const rebuilt = await until('runs rebuilt', async () => {
    const now = await runsMeta();
    return now.generation !== meta.generation ? now : null;
  });
  expect(await fx.redis.client.hget(rebuilt.key, 'version')).toBe(String(runsVersion));
  // The rebuild's line is written once every rebuild of the check is swapped in: after the swap seen above.
  await until('the rebuild logged', async () => (logged('projection was built by an older version').length > 0 ? true : null));
  expect(logged('projection lost from Redis')).toEqual([]);
  expect(logged('projection was built by an older version of its definition: rebuilt to this one')).toEqual([
    expect.objectContaining({ level: 'warn', projection: 'runs', reason: 'version_changed', status: 'swapped' }),
  ]);
  await fx.caughtUp(15_000);
  expect((await ready()).status).toBe(200);
}, 60_000);

it('notices built by an older release, with events stored while no notifier ran: rebuilt only to what was published, so those events still get their notices, once', async () => {
  await fx.service.stop();
  const stream = scenarioStream(fx.nats, fx.prefix);
  const seen = await countNotices(fx.nats, fx.prefix);
  await stream.publish(0);
  await stream.publish(1);
  const noticesBase = `${projectionPrefix(fx.prefix)}:notices`;
  const noticesMeta = `${noticesBase}:g${await fx.redis.client.get(`${noticesBase}:active`)}:~meta`;
  const noticesVersion = batonProjections().find((p) => p.name === 'notices')!.version;
  const appliedBefore = Number(await fx.redis.client.hget(noticesMeta, 'seq'));
  await fx.redis.client.hset(noticesMeta, 'version', String(noticesVersion - 1));
  const mark = log.lines.length;
  // This release's notifier starts: it rebuilds notices (version_changed) — not past what was published.
  restarted = await startNotifier({
    ...process.env,
    BATON_PREFIX: fx.prefix,
    HTTP_PORT: '0',
    LOG_LEVEL: 'info',
    NOTIFIER_ANSWER_WAIT_MS: '200',
    NOTIFIER_PROJECTION_CHECK_MS: '200',
  });
  await fx.caughtUp(15_000);
  await fx.nats.connection.flush();
  await until('every notice', async () => (seen.size === 2 * stream.noticesPerProject ? true : null));
  await sleep(300);
  expect([...seen.values()]).toEqual(Array(2 * stream.noticesPerProject).fill(1));
  expect(logged('projection rebuilt at start', mark)).toEqual([
    expect.objectContaining({ projection: 'notices', reason: 'version_changed', last_seq: appliedBefore, notices_from_seq: appliedBefore + 1 }),
  ]);
}, 60_000);

it('a notifier that starts beside a newer release stands back before rebuilding anything: a projection Redis lost is the newer release`s to rebuild; its start line names the check it waits on', async () => {
  const meta = await runsMeta();
  await fx.redis.client.hset(meta.key, 'version', String(runsVersion + 1));
  // Redis lost inbox meanwhile: the newer release rebuilds it at its own version.
  const inboxActive = `${projectionPrefix(fx.prefix)}:inbox:active`;
  const inboxGeneration = (await fx.redis.client.get(inboxActive)) as string;
  await fx.redis.client.del(inboxActive);
  const mark = log.lines.length;
  const another = await startNotifier({
    ...process.env,
    BATON_PREFIX: fx.prefix,
    HTTP_PORT: '0',
    LOG_LEVEL: 'info',
    NOTIFIER_PROJECTION_CHECK_MS: '200',
  });
  try {
    await sleep(1_000);
    expect(await fx.redis.client.get(inboxActive)).toBeNull();
    expect(logged('projection rebuilt', mark)).toEqual([]);
    // Said by the notifier that starts (and by the one already running, which stands back too).
    expect(logged('a newer release of the notifier built these projections', mark).length).toBeGreaterThanOrEqual(1);
    expect(logged('notifier ready', mark)).toEqual([]);
    expect(logged('notifier started, not ready yet', mark)).toEqual([
      expect.objectContaining({ level: 'info', msg: expect.stringContaining('projection_versions'), not_ready: ['projection_versions'] }),
    ]);
  } finally {
    await another.stop();
    await fx.redis.client.set(inboxActive, inboxGeneration);
    await fx.redis.client.hset(meta.key, 'version', String(runsVersion));
  }
}, 60_000);
