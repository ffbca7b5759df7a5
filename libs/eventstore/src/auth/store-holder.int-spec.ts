import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'nats';
import { freePort, startNatsServer, type PrivateNatsServer } from '../int/servers';
import { natsServerOnStore, storeLeftBehind, streamsIn } from './store-holder';

/*
 * npm start must not start a second nats-server on a JetStream store another one holds (a server an
 * SRE started by hand from the deployment's configuration for a restore, an orphan of an earlier
 * start): two servers on one store corrupt it. The check reads the running processes' command
 * lines; real nats-servers here, one given its store with -sd, one its configuration with -c by a
 * relative path from another working folder.
 */

describe('natsServerOnStore (real nats-server processes)', () => {
  let dir: string;
  const servers: PrivateNatsServer[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-store-holder-'));
  });
  afterAll(async () => {
    for (const server of servers) await server.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds a nats-server by its -sd store, and none for another store or once it stopped', async () => {
    const server = await startNatsServer({ jetstream: true });
    servers.push(server);
    const sd = server.child.spawnargs[server.child.spawnargs.indexOf('-sd') + 1] as string;
    expect(natsServerOnStore({ store: sd, confFile: join(dir, 'none.conf') })).toMatchObject({ pid: server.child.pid });
    expect(natsServerOnStore({ store: join(dir, 'other-store'), confFile: join(dir, 'none.conf') })).toBeNull();
    await server.stop();
    expect(natsServerOnStore({ store: sd, confFile: join(dir, 'none.conf') })).toBeNull();
  });

  it('finds a nats-server started from the configuration by a relative path in another working folder', async () => {
    const port = await freePort();
    const store = join(dir, 'store');
    const conf = join(dir, 'nats-server.conf');
    writeFileSync(conf, `listen: 127.0.0.1:${port}\njetstream { store_dir: "${store}" }\n`);
    const cwd = tmpdir();
    const child = spawn('nats-server', ['-c', relative(cwd, conf)], { cwd, stdio: 'ignore' });
    try {
      for (let i = 0; i < 100 && natsServerOnStore({ store, confFile: conf }) === null; i++) await new Promise((r) => setTimeout(r, 50));
      expect(natsServerOnStore({ store, confFile: conf })).toMatchObject({ pid: child.pid });
      // The store named by another path to the same folder is the same store.
      expect(natsServerOnStore({ store: join(dir, 'elsewhere'), confFile: join(dir, '.', 'nats-server.conf') })).toMatchObject({ pid: child.pid });
    } finally {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    expect(natsServerOnStore({ store, confFile: conf })).toBeNull();
  });

  it('says nothing where there is no /proc to read', () => {
    expect(natsServerOnStore({ store: '/x', confFile: '/y' }, join(dir, 'no-proc'))).toBeNull();
  });

  it('reads the streams a store holds from the folders nats-server keeps, and says when a start elsewhere would leave them behind', async () => {
    const server = await startNatsServer({ jetstream: true });
    servers.push(server);
    const sd = server.child.spawnargs[server.child.spawnargs.indexOf('-sd') + 1] as string;
    const nc = await connect({ servers: server.url });
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'LEFT_EVENTS', subjects: ['left.ev.>'] });
    await jsm.streams.add({ name: 'LEFT_DLQ', subjects: ['left.dlq.>'] });
    await nc.close();
    await server.stop();
    expect(streamsIn(sd)).toEqual(['$G/LEFT_DLQ', '$G/LEFT_EVENTS']);
    const empty = join(dir, 'empty-store');
    mkdirSync(join(empty, 'jetstream', '$G', 'streams'), { recursive: true });
    expect(streamsIn(empty)).toEqual([]);
    expect(streamsIn(join(dir, 'no-such-store'))).toEqual([]);
    // The configuration names a store with streams; the one about to be used holds none: left behind.
    expect(storeLeftBehind({ from: sd, to: empty })).toEqual({ from: sd, to: empty, streams: ['$G/LEFT_DLQ', '$G/LEFT_EVENTS'] });
    expect(storeLeftBehind({ from: sd, to: join(dir, 'no-such-store') })).toMatchObject({ streams: ['$G/LEFT_DLQ', '$G/LEFT_EVENTS'] });
    // Not when it is the same folder, when the configuration names none or an empty one, or when the
    // store about to be used has streams of its own (the whole var/ was copied over).
    expect(storeLeftBehind({ from: join(sd, '.'), to: sd })).toBeNull();
    expect(storeLeftBehind({ from: undefined, to: empty })).toBeNull();
    expect(storeLeftBehind({ from: empty, to: join(dir, 'no-such-store') })).toBeNull();
    expect(storeLeftBehind({ from: sd, to: sd.replace(/\/?$/, '') })).toBeNull();
    mkdirSync(join(empty, 'jetstream', 'BATON', 'streams', 'COPIED_EVENTS'), { recursive: true });
    expect(storeLeftBehind({ from: sd, to: empty })).toBeNull();
  });
});
