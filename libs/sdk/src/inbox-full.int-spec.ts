import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
// Test only: boots the real ledger service in-process: its edge relays the agent's publishes, and
// it provisions the inbox with BATON_INBOX_MAX_BYTES as every service does.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { createBatonClient, EdgeUnavailableError, StorageFull, type BatonAgent } from './index';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * A full inbox (BATON_INBOX_MAX_BYTES; docs/sre.md, Capacity) through the agent edge: the stream's
 * refusal reaches the agent as the typed `StorageFull` (`storage_full`) at once — not taken for a
 * ledger that does not relay (the stream's 503 and "no responders" share nats.js's client code),
 * nor retried — and the inbox keeps every message it acknowledged.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';
const LIMIT = 64 * 1024;

describe('the SDK through the agent edge, the inbox full (real NATS, the real ledger in process)', () => {
  const prefix = `if${randomBytes(5).toString('hex')}`;
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService | null = null;
  let agent: BatonAgent;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-inbox-full-int', reconnect: false });
    ledger = await startLedger({
      ...process.env,
      BATON_PREFIX: prefix,
      BATON_INSTANCE: 'sdk-inbox-full',
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_INBOX_MAX_BYTES: String(LIMIT),
    });
    const definition = { project: P, agents: [{ name: 'bob' }], workflows: [{ name: 'w', version: 1, entry: 'one', steps: [{ id: 'one', agent: 'bob' }] }] };
    await storeDefinition(nats, prefix, definition);
    agent = await createBatonClient({ nats, prefix, project: P, agent: 'bob', edge: true, publishTimeoutMs: 2_000, publishAttempts: 3 });
  }, 30_000);

  afterAll(async () => {
    await agent?.close();
    await ledger?.stop();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.close();
    }
  });

  it('results fill the inbox; the next publish throws StorageFull (storage_full) and every acknowledged result is still stored', async () => {
    expect((await nats.jsm.streams.info(inbox)).config).toMatchObject({ max_bytes: LIMIT, discard: 'new' });
    const acked: number[] = [];
    let refused: unknown = null;
    for (let i = 0; i < 50 && refused === null; i++) {
      await agent
        .publishResult({ result_id: `r-${i}`, run_id: 'ar-1', workflow_run_id: 'wr-1', body: 'x'.repeat(8 * 1024), handoff_id: 'h-1', claim_id: 'c-1' })
        .then((receipt) => acked.push(receipt.seq))
        .catch((error: unknown) => {
          refused = error;
        });
    }
    expect(acked.length).toBeGreaterThan(2);
    expect(refused).toBeInstanceOf(StorageFull);
    expect(refused).not.toBeInstanceOf(EdgeUnavailableError);
    expect(refused).toMatchObject({ code: 'storage_full', limit: 'stream_bytes' });

    // Refused alike while it is full (a publish the stream answered is not sent again).
    const again = await agent
      .publishResult({ result_id: 'r-again', run_id: 'ar-1', workflow_run_id: 'wr-1', body: 'x'.repeat(8 * 1024), handoff_id: 'h-1', claim_id: 'c-1' })
      .catch((error: unknown) => error);
    expect(again).toBeInstanceOf(StorageFull);

    const state = (await nats.jsm.streams.info(inbox, { subjects_filter: `${prefix}.in.${P}.result.bob` })).state;
    expect({ first: state.first_seq, messages: state.messages }).toEqual({ first: acked[0], messages: acked.length });
  }, 60_000);
});
