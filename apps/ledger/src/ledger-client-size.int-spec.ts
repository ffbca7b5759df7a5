import { LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { LEDGER_DLQ_SOURCE } from './commands/ledger-commands';
import { agentsOf, bootLedger, connectTest, deadLetters, deleteStreams, randomPrefix } from './int/support';

// A ledger command too large for the ledger (256 KiB) or for the NATS server (1 MiB) is refused by
// the client that would send it, typed `payload_too_large` (`rejected`) and not sent — never the
// retryable `unavailable` a client told to retry with the same key would retry forever.

describe('LedgerClient: a command over the cap is refused before it is sent (real NATS, the ledger in process)', () => {
  const prefix = randomPrefix();
  const as = agentsOf('acme');
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;

  beforeAll(async () => {
    nats = await connectTest('ledger-client-size-int');
    ledger = await bootLedger(prefix, 'ledger-client-size');
    client = new LedgerClient(nats, prefix, { timeoutMs: 5_000 });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it.each([
    ['over the ledger’s 256 KiB', 300 * 1024],
    ['over the server’s 1 MiB max_payload', 1_100 * 1024],
  ])('%s: payload_too_large, rejected, with the size; nothing reached the ledger', async (_what, size) => {
    const reply = await client.create(
      'acme',
      { handoff_id: `h-big-${size}`, from_agent: 'alice', to_agent: 'bob', summary: 'x'.repeat(size), idempotency_key: `big-${size}` },
      as('alice'),
    );
    expect(reply).toMatchObject({ ok: false, error: { code: 'payload_too_large', kind: 'rejected' } });
    expect(!reply.ok && reply.error.message).toMatch(/bytes; the cap is 262144/);
    // The ledger would have recorded what it refused: it saw nothing.
    expect(await deadLetters(nats, prefix, LEDGER_DLQ_SOURCE)).toEqual([]);
  });
});
