import { Subjects, type HandoffRecord, type LedgerReply } from '@baton/contracts';
import { batonStreamNames, LedgerClient, type NatsHandle } from '@baton/eventstore';
import { metricSample, type RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { agentsOf, bootLedger, connectTest, deleteStreams, offers, publishDefinition, randomPrefix } from './int/support';

/*
 * A full inbox (BATON_INBOX_MAX_BYTES; docs/sre.md, Capacity) refuses the ledger's offers. The
 * ledger says so once — `storage full` when it starts, `storage full no longer` when a publish is
 * stored again — not once per handoff (SRE audit finding 3: 14 528 warn lines in 25 s), and shows
 * it where an SRE looks: `baton_storage_full{limit}`, `baton_storage_full_refused_total{limit}` and
 * `details.storage` of `/health/ready`, which stays 200.
 */

const P = 'shop';
const as = agentsOf(P);
const LIMIT = 64 * 1024;
const HANDOFFS = 30;
const encoder = new TextEncoder();

interface LogLine {
  level: string;
  msg: string;
  [key: string]: unknown;
}

describe('the ledger with its inbox full (real NATS, the real ledger in process)', () => {
  const prefix = randomPrefix();
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;
  let base: string;
  const lines: LogLine[] = [];
  let writeSpy: jest.SpyInstance;

  beforeAll(async () => {
    writeSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      for (const text of String(chunk).split('\n')) {
        if (!text.startsWith('{')) continue;
        try {
          const line = JSON.parse(text) as LogLine;
          if (line.service === 'ledger') lines.push(line);
        } catch {
          // not a log line of ours
        }
      }
      return true;
    });
    nats = await connectTest('ledger-storage-full-int');
    ledger = await bootLedger(prefix, 'ledger-storage-full', { LOG_LEVEL: 'info', BATON_INBOX_MAX_BYTES: String(LIMIT) });
    base = await ledger.app.getUrl();
    await publishDefinition(nats, prefix, { project: P, agents: [{ name: 'alice' }, { name: 'bob' }], workflows: [] });
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000 });
  }, 30_000);

  afterAll(async () => {
    await ledger?.stop();
    writeSpy?.mockRestore();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  /** Fill the inbox to its last bytes: messages of shrinking size until even a small one is refused. */
  async function fillInbox(): Promise<void> {
    for (const size of [4096, 1024, 128]) {
      for (let i = 0; i < 1000; i++) {
        const refused = await nats.js
          .publish(Subjects.agentResult(prefix, P, 'bob'), encoder.encode('x'.repeat(size)))
          .then(() => false)
          .catch(() => true);
        if (refused) break;
      }
    }
  }

  const create = async (id: string): Promise<HandoffRecord> => {
    const reply: LedgerReply = await client.create(
      P,
      { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: `work ${id}`, idempotency_key: `create-${id}` },
      as('alice'),
    );
    if (!reply.ok) throw new Error(`create ${id}: ${reply.error.code}: ${reply.error.message}`);
    return reply.handoff;
  };
  const metrics = async () => (await fetch(`${base}/metrics`)).text();
  const ready = async () => {
    const res = await fetch(`${base}/health/ready`);
    return { status: res.status, body: (await res.json()) as { details?: { storage?: { full: boolean; conditions: Array<Record<string, unknown>> } } } };
  };
  const storageLines = () => lines.filter((l) => l.msg.startsWith('storage '));

  it('one warn when its offers start being refused, none per handoff; counted, and on readiness (still 200); one line when a publish is stored again', async () => {
    await fillInbox();
    for (let i = 0; i < HANDOFFS; i++) await create(`h-${i}`);

    // Every handoff is stored; none of their offers is (the inbox refused each).
    expect(await offers(nats, prefix, P, 'bob')).toHaveLength(0);
    expect(lines.filter((l) => l.msg === 'offer left to the handoff reactor')).toEqual([]);
    const started = storageLines();
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ level: 'warn', limit: 'stream_bytes', stream: inbox, subject: Subjects.offer(prefix, P, 'bob') });

    const text = await metrics();
    expect(metricSample(text, 'baton_storage_full_refused_total', { limit: 'stream_bytes', service: 'ledger' })).toBeGreaterThanOrEqual(HANDOFFS);
    expect(metricSample(text, 'baton_storage_full', { limit: 'stream_bytes' })).toBe(1);
    expect(metricSample(text, 'baton_storage_full', { limit: 'account_storage' })).toBe(0);

    const full = await ready();
    expect(full.status).toBe(200);
    expect(full.body.details?.storage?.full).toBe(true);
    expect(full.body.details?.storage?.conditions).toEqual([
      expect.objectContaining({ limit: 'stream_bytes', stream: inbox, last_subject: Subjects.offer(prefix, P, 'bob') }),
    ]);
    expect(full.body.details?.storage?.conditions[0]?.['refused']).toBeGreaterThanOrEqual(HANDOFFS);

    // Room is made (the results aged out, say): the next offer is stored, and the condition ends.
    await nats.jsm.streams.purge(inbox, { filter: Subjects.agentResult(prefix, P, 'bob') });
    await create('h-after');
    await waitFor(async () => (await offers(nats, prefix, P, 'bob')).length > 0, 'an offer stored', { timeoutMs: 10_000 });
    await waitFor(() => storageLines().length === 2, 'the storage full no longer line', { timeoutMs: 5_000 });
    const ended = storageLines()[1];
    expect(ended).toMatchObject({ level: 'info', msg: 'storage full no longer: a publish was stored', limit: 'stream_bytes', stream: inbox });
    expect(ended?.['refused']).toBeGreaterThanOrEqual(HANDOFFS);
    expect(metricSample(await metrics(), 'baton_storage_full', { limit: 'stream_bytes' })).toBe(0);
    const after = await ready();
    expect(after).toMatchObject({ status: 200, body: { details: { storage: { full: false, conditions: [] } } } });
  }, 60_000);
});
