import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefixOf, Limits, Subjects } from '@baton/contracts';
import {
  AGENT_USER_LIMITS,
  batonStreamNames,
  batonTopology,
  connectNats,
  decodeJwtClaims,
  jwtOfCreds,
  mapPublishError,
  provision,
  ProvisionError,
  StorageFull,
  type NatsHandle,
} from '@baton/eventstore';
import { headers as natsHeaders } from 'nats';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
import { main } from './main';
import { bufferedIo } from './output';

/*
 * What bounds an agent and the deployment's disk (docs/identity.md, docs/sre.md "Capacity"),
 * enforced by a real nats-server configured by `baton nats-config`: an agent's credentials from
 * `baton creds agent` carry the largest message it may publish (the 256 KiB body any entry point
 * takes, plus headers) and its most subscriptions, and the server refuses more; `--max-store` caps
 * what the account's streams hold together, and the server refuses a publish past it with an
 * error the event store types `storage_full`. Before, an agent's JWT said `payload: -1, subs: -1`
 * and the account `disk_storage: -1`: nothing but the disk bounded them.
 */

const MiB = 1024 * 1024;
const PREFIX = 'baton';

describe('limits baton nats-config and baton creds agent set, enforced by a real nats-server', () => {
  let dir: string;
  let auth: string;
  let server: PrivateNatsServer | undefined;
  let url: string;
  const handles: NatsHandle[] = [];

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { BATON_NATS_DIR: auth, BATON_PREFIX: PREFIX } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-limits-'));
    auth = join(dir, 'nats-auth');
    const port = await freePort();
    // 8 MiB is below the DLQ's default 1 GiB reservation: refused unless overridden (the second test shows the services then cannot start).
    const argv = ['nats-config', '--listen', `127.0.0.1:${port}`, '--store-dir', join(dir, 'js'), '--max-store', '8MiB', '--json'];
    expect((await baton(...argv)).code).toBe(1);
    const configured = await baton(...argv, '--allow-below-reserved');
    expect(configured.code).toBe(0);
    expect(configured.err).toContain('"code":"max_store_below_reserved"');
    const summary = JSON.parse(configured.out) as { server_config: string; max_store: number | null; creds: Record<string, string> };
    expect(summary.max_store).toBe(8 * MiB);
    server = await startNatsServer({ port, config: summary.server_config });
    url = server.url;
  }, 30_000);

  afterAll(async () => {
    for (const handle of handles) await handle.close().catch(() => undefined);
    await server?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  const connectAs = async (credsFile: string, inboxPrefix: string, checkJetStream = true) => {
    const handle = await connectNats({ servers: url, credsFile, inboxPrefix, reconnect: false, name: 'limits-int', checkJetStream });
    handles.push(handle);
    return handle;
  };

  it('an agent`s credentials carry its largest message and its most subscriptions; the server refuses a larger message (and closes the connection), whatever the client checks', async () => {
    const issued = await baton('creds', 'agent', '--project', 'acme', '--agent', 'bob', '--json');
    expect(issued.code).toBe(0);
    const { file, limits } = JSON.parse(issued.out) as { file: string; limits: { payload: number; subs: number } };
    expect(limits).toEqual({ payload: Limits.maxMessageBytes + 16 * 1024, subs: 1_000 });
    expect(limits).toEqual(AGENT_USER_LIMITS);
    expect(decodeJwtClaims(jwtOfCreds(readFileSync(file, 'utf8')))['nats']).toMatchObject({ payload: limits.payload, subs: limits.subs, data: -1 });

    const agent = await connectAs(file, inboxPrefixOf(PREFIX, { kind: 'agent', project: 'acme', agent: 'bob' }), false);
    await agent.connection.flush();
    // The server told the client its limit: nats.js refuses a larger publish itself.
    expect(agent.connection.info?.max_payload).toBe(limits.payload);
    const subject = `${PREFIX}.edge.acme.result.bob`;
    // The largest body an entry point takes, with headers, fits.
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', `result:acme:wr-1/${'r'.repeat(200)}`);
    agent.connection.publish(subject, new Uint8Array(Limits.maxMessageBytes), { headers: hdrs });
    await agent.connection.flush();
    expect(() => agent.connection.publish(subject, new Uint8Array(limits.payload + 1))).toThrow(expect.objectContaining({ code: 'MAX_PAYLOAD_EXCEEDED' }));
    // A client that ignores it (any language): the server refuses the message and closes the
    // connection (the client sees the socket go); the same message from an agent issued with no
    // limit (`--max-payload none`) is taken, as every agent's was before.
    const ignoring = (handle: NatsHandle) => {
      (handle.connection as unknown as { protocol: { info: { max_payload: number } } }).protocol.info.max_payload = 8 * MiB;
      handle.connection.publish(subject, new Uint8Array(300 * 1024));
    };
    const closed = agent.connection.closed();
    ignoring(agent);
    // Closed by the server (an error), not by this client.
    expect(await closed).not.toBeUndefined();
    expect(agent.connection.isClosed()).toBe(true);
    const open = await baton('creds', 'agent', '--project', 'acme', '--agent', 'free', '--max-payload', 'none', '--json');
    expect(JSON.parse(open.out)).toMatchObject({ limits: { payload: -1, subs: 1_000 } });
    const free = await connectAs(
      (JSON.parse(open.out) as { file: string }).file,
      inboxPrefixOf(PREFIX, { kind: 'agent', project: 'acme', agent: 'free' }),
      false,
    );
    ignoring(free);
    await free.connection.flush();
    expect(free.connection.isClosed()).toBe(false);

    // Another limit for one agent.
    const small = await baton('creds', 'agent', '--project', 'acme', '--agent', 'tiny', '--max-payload', '64KiB', '--max-subs', '5', '--json');
    expect(JSON.parse(small.out)).toMatchObject({ limits: { payload: 64 * 1024, subs: 5 } });
    const tiny = await connectAs(
      (JSON.parse(small.out) as { file: string }).file,
      inboxPrefixOf(PREFIX, { kind: 'agent', project: 'acme', agent: 'tiny' }),
      false,
    );
    await tiny.connection.flush();
    expect(tiny.connection.info?.max_payload).toBe(64 * 1024);
    // The services and the admin are not limited (a dead letter carries another's whole message).
    expect((await baton('creds', 'service', 'router', '--max-payload', '1MiB')).code).toBe(2);
    // A size that is no size is refused before anything is written.
    expect((await baton('creds', 'agent', '--project', 'acme', '--agent', 'bad', '--max-payload', '12 apples')).code).toBe(2);
  }, 30_000);

  it('--max-store: the account`s streams may not reserve more than it, and past it the server refuses a publish — StorageFull (storage_full, account_storage), nothing dropped', async () => {
    const admin = await connectAs(join(auth, 'creds', 'admin.creds'), inboxPrefixOf(PREFIX, { kind: 'op', relay: 'admin' }));
    expect((await admin.jsm.getAccountInfo()).limits.max_storage).toBe(8 * MiB);
    // The DLQ's default 1 GiB does not fit in 8 MiB: the services would not start, and say why.
    const refused = await provision(admin.jsm, batonTopology(PREFIX), { retryForMs: 0 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ProvisionError);
    expect(String(refused)).toMatch(/insufficient storage resources/);
    await provision(admin.jsm, batonTopology(PREFIX, { dlqMaxBytes: 1 * MiB, inboxMaxBytes: 2 * MiB }));

    // The events stream has no limit of its own: the account's stops it.
    const events = batonStreamNames(PREFIX).events;
    let stored = 0;
    let error: unknown = null;
    for (let i = 0; i < 80 && error === null; i++) {
      await admin.js
        .publish(`${PREFIX}.ev.acme.run.r${i}`, new Uint8Array(256 * 1024))
        .then(() => stored++)
        .catch((e: unknown) => {
          error = e;
        });
    }
    expect(stored).toBeGreaterThan(10);
    const full = mapPublishError(error, Subjects.events(PREFIX), undefined);
    expect(full).toBeInstanceOf(StorageFull);
    expect(full).toMatchObject({ code: 'storage_full', limit: 'account_storage' });
    expect((await admin.jsm.streams.info(events)).state.messages).toBe(stored);
  }, 60_000);
});
