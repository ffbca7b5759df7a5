import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
// Test only: boots the real ledger service in-process: its edge relay is what goes away and comes back.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { createBatonClient, EdgeUnavailableError, InvalidInputError, type BatonAgent } from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * What an agent's publish through its edge does while no ledger relays it (stopped, restarting),
 * and a result that names no claim, against the real NATS and the real ledger in process.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('the SDK through the agent edge while no ledger relays it (real NATS, the real ledger in process)', () => {
  const prefix = `eu${randomBytes(5).toString('hex')}`;
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService | null = null;
  let agent: BatonAgent;

  const boot = async () => {
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-edge-unavailable', HTTP_PORT: '0', LOG_LEVEL: 'error' });
  };
  const storedStarts = async (): Promise<number> => {
    const info = await nats.jsm.streams.info(inbox, { subjects_filter: `${prefix}.in.${P}.start.bob` });
    return info.state.messages;
  };

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-edge-unavailable-int', reconnect: false });
    await boot();
    const definition = { project: P, agents: [{ name: 'bob' }], workflows: [{ name: 'w', version: 1, entry: 'one', steps: [{ id: 'one', agent: 'bob' }] }] };
    await storeDefinition(nats, prefix, definition);
    // 2 attempts of 1 s: the client keeps trying an unrelayed edge for about 2.2 s.
    agent = await createBatonClient({ nats, prefix, project: P, agent: 'bob', edge: true, publishTimeoutMs: 1_000, publishAttempts: 2 });
  });

  afterAll(async () => {
    await agent?.close();
    await ledger?.stop();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.close();
    }
  });

  it('a result naming no claim is refused before it is sent (claim_required, the fields named): its run could never take it', async () => {
    const refused = await agent.publishResult({ result_id: 'r-unclaimed', run_id: 'ar-1', workflow_run_id: 'wr-1', body: 'done' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect(refused).toMatchObject({ code: 'claim_required' });
    expect((refused as InvalidInputError).rejection.issues.map((i) => i.path)).toEqual(['handoff_id', 'claim_id']);
    const half = await agent
      .publishResult({ result_id: 'r-half', run_id: 'ar-1', workflow_run_id: 'wr-1', body: 'done', handoff_id: 'h-1' })
      .catch((e: unknown) => e);
    expect((half as InvalidInputError).rejection.issues.map((i) => i.path)).toEqual(['claim_id']);
    const info = await nats.jsm.streams.info(inbox, { subjects_filter: `${prefix}.in.${P}.result.bob` });
    expect(info.state.messages).toBe(0);
  });

  it('no ledger: the publish is tried again, then EdgeUnavailableError (edge_unavailable, nothing stored), not StreamNotFound', async () => {
    await ledger!.stop();
    ledger = null;
    const started = Date.now();
    const failure = await agent.startRun({ workflow_run_id: 'wr-down', workflow: 'w', started_by: 'dana' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(EdgeUnavailableError);
    expect(failure).toMatchObject({ code: 'edge_unavailable', tries: expect.any(Number) });
    expect((failure as EdgeUnavailableError).tries).toBeGreaterThanOrEqual(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(await storedStarts()).toBe(0);
  });

  it('a ledger back within the wait: the same publish goes through, stored once', async () => {
    const pending = agent.startRun({ workflow_run_id: 'wr-back', workflow: 'w', started_by: 'dana' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    await boot();
    await expect(pending).resolves.toMatchObject({ duplicate: false, stream: inbox });
    expect(await storedStarts()).toBe(1);
  });
});
