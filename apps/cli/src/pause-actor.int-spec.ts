import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { createEventRegistry } from '@baton/contracts';
import { batonStreamNames, connectNats, JetStreamEventStore, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
// Test only: boots the real ledger in-process, so what the CLI sends is recorded as the ledger records it.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../ledger/src/ledger';
import { main } from './main';
import { bufferedIo } from './output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'pauseactor';

/**
 * `baton pause` / `baton resume` send with the admin's credentials and name `BATON_OPERATOR`. Anyone
 * holding those credentials can set it to any name, so the name is a claim: the ledger records the
 * admin connection (`admin`) as the actor and the named person as `on_behalf_of`, and the CLI shows
 * it as claimed. Before, the named person was the recorded actor.
 */
describe('baton pause / resume record the admin connection as the actor, BATON_OPERATOR as on_behalf_of (real ledger, real NATS)', () => {
  const prefix = `pa${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService;
  let store: JetStreamEventStore;

  async function baton(env: Record<string, string>, ...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, BATON_PREFIX: prefix, ...env } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'cli-pause-actor-int', reconnect: false });
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'cli-pause-actor', HTTP_PORT: '0', LOG_LEVEL: 'error' });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  });

  afterAll(async () => {
    await ledger?.stop();
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats?.jsm.streams.delete(name).catch(() => undefined);
    await nats?.close();
  });

  it('BATON_OPERATOR naming someone else (a person with no pause rights) is on_behalf_of; the actor, paused_by and resumed_by are admin', async () => {
    const paused = await baton({ BATON_OPERATOR: 'mallory', USER: 'sam' }, 'pause', P, '--reason', 'incident 31', '--force', '--key', 'pa-1');
    expect(paused).toMatchObject({ code: 0, err: '' });
    expect(paused.out).toMatch(/paused_by: +admin\n/);
    expect(paused.out).toMatch(/on_behalf_of: +mallory \(claimed by the admin connection\)\n/);

    const shown = await baton({ BATON_OPERATOR: 'mallory' }, 'project', P, '--json');
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.out)).toMatchObject({ control: { status: 'paused', paused_by: 'admin', on_behalf_of: 'mallory' } });

    const resumed = await baton({ BATON_OPERATOR: 'mallory' }, 'resume', P, '--key', 'ra-1');
    expect(resumed).toMatchObject({ code: 0, err: '' });
    // Nobody named: the admin connection alone, nothing claimed.
    expect(await baton({ BATON_OPERATOR: '', USER: '' }, 'pause', P, '--reason', 'drill', '--force', '--key', 'pa-2')).toMatchObject({ code: 0 });

    const events = (await store.read({ project: P, kind: 'project', id: 'control' })).events;
    expect(
      events.map((e) => {
        const d = e.payload as { paused_by?: string; resumed_by?: string; on_behalf_of?: string };
        return [e.type, e.actor, d.paused_by ?? d.resumed_by, d.on_behalf_of];
      }),
    ).toEqual([
      ['project.paused', 'admin', 'admin', 'mallory'],
      ['project.resumed', 'admin', 'admin', 'mallory'],
      ['project.paused', 'admin', 'admin', undefined],
    ]);
  });
});
