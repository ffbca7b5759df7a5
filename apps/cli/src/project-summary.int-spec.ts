import { randomBytes } from 'node:crypto';
import { createEventRegistry, ProjectDefinitionSchema, type EventEnvelope } from '@baton/contracts';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * `baton project <p>` names each workflow with its versions: after v2 is published an author sees
 * that v1 exists too (runs in flight may be pinned to it), and which versions only earlier
 * publishes held. `--json` keeps `workflows` the names it always was and adds `workflow_versions`.
 * The project's definition events are stored in a real events stream, as the router stores them.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const definition = (workflows: ReadonlyArray<[string, number]>) =>
  ProjectDefinitionSchema.parse({
    project: 'shop',
    agents: [{ name: 'coder' }],
    workflows: workflows.map(([name, version]) => ({ name, version, entry: 'build', steps: [{ id: 'build', agent: 'coder', terminal: true }] })),
  });

describe('baton project: each workflow with its versions (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  /** Store publishes of shop's definition, one after the other, as `definition.published` events of `definition/current`. */
  async function publish(...definitions: ReadonlyArray<ReadonlyArray<[string, number]>>): Promise<void> {
    const registry = createEventRegistry();
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry });
    let version = 0;
    for (const [index, workflows] of definitions.entries()) {
      const at = `2026-03-0${index + 1}T10:00:00.000Z`;
      const envelope: EventEnvelope = {
        id: `def-${index}`,
        type: 'definition.published',
        version: registry.currentVersion('definition.published'),
        aggregate: { kind: 'definition', id: 'current' },
        project: 'shop',
        occurredAt: at,
        actor: 'admin',
        origin: 'operator',
        causationId: null,
        correlationId: 'shop',
        payload: { definition: definition(workflows), published_by: 'admin', published_at: at, digest: `digest-${index}` },
      };
      version = (await store.append({ project: 'shop', kind: 'definition', id: 'current' }, [envelope], { expectedVersion: version })).lastSeq;
    }
  }

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
  });

  afterEach(async () => {
    const names = batonStreamNames(prefix);
    for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
  });

  it('after v2 is published beside v1: workflows: ship (v1, v2); --json keeps workflows the names and adds workflow_versions', async () => {
    await publish(
      [
        ['ship', 1],
        ['review', 1],
      ],
      [
        ['ship', 1],
        ['ship', 2],
      ],
    );
    const shown = await baton('project', 'shop');
    expect(shown.code).toBe(0);
    // review is no longer in the definition in force: still named, with the version runs may be pinned to.
    expect(shown.out).toMatch(/\nworkflows: +ship \(v1, v2\), review \(v1 only in earlier publishes\)\n/);
    const json = JSON.parse((await baton('project', 'shop', '--json')).out) as { definition: Record<string, unknown> };
    expect(json.definition['workflows']).toEqual(['ship']);
    expect(json.definition['workflow_versions']).toEqual([
      { name: 'ship', versions: [1, 2], in_force: [1, 2] },
      { name: 'review', versions: [1], in_force: [] },
    ]);
  });

  it('v2 published in place of v1: the line says v1 is only in earlier publishes (runs in flight may be pinned to it)', async () => {
    await publish([['ship', 1]], [['ship', 2]]);
    const shown = await baton('project', 'shop');
    expect(shown.out).toMatch(/\nworkflows: +ship \(v2; v1 only in earlier publishes\)\n/);
    const json = JSON.parse((await baton('project', 'shop', '--json')).out) as { definition: Record<string, unknown> };
    expect(json.definition).toMatchObject({ workflows: ['ship'], publishes: 2, workflow_versions: [{ name: 'ship', versions: [1, 2], in_force: [2] }] });
  });
});
