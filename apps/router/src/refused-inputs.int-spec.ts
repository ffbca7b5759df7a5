import { randomBytes } from 'node:crypto';
import { MsgIds, Subjects } from '@baton/contracts';
import { batonStreamNames, connectNats, DeadLetterReason, DlqHeader, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { startRouter } from './router.app';
import { deleteStreams } from './int/support';

/*
 * What an agent publishes and the router refuses is lettered under a per-sender budget
 * (BATON_REFUSED_LETTERS_PER_MINUTE): an agent refused in a loop — each result under its own id,
 * so the stream stores every one — gets its budget of letters and then one `refusals_suppressed`
 * letter; before, every refusal kept a letter of its own, whole, in the shared DLQ.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const BUDGET = 4;
const encoder = new TextEncoder();

describe('router: refused agent inputs are lettered under a per-sender budget (real NATS)', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let router: RunningService | null = null;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({
      ...process.env,
      NATS_URL,
      BATON_PREFIX: prefix,
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
      BATON_REFUSED_LETTERS_PER_MINUTE: String(BUDGET),
    });
  }, 20_000);

  afterAll(async () => {
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 20_000);

  /** The router-results letters of `agent` (by the subject each names), oldest first. */
  const lettersOf = async (agent: string) => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Array<{ reason: string; source: string; body: unknown }> = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (msg === null || msg.header.get(DlqHeader.subject) !== Subjects.agentResult(prefix, 'acme', agent)) continue;
      out.push({ reason: msg.header.get(DlqHeader.reason), source: msg.header.get(DlqHeader.source), body: JSON.parse(new TextDecoder().decode(msg.data)) });
    }
    return out;
  };

  /** `n` results of `agent` the router refuses (a body that breaks the contract), each under its own id. */
  const publishRefused = async (agent: string, n: number) => {
    for (let i = 0; i < n; i++) {
      await nats.js.publish(Subjects.agentResult(prefix, 'acme', agent), encoder.encode(JSON.stringify({ junk: i })), {
        msgID: MsgIds.result('acme', 'run-1', `${agent}-${i}`),
      });
    }
  };

  it('a flooding agent gets its budget of letters, then one summary (written at the latest when the router stops); another agent keeps its own budget', async () => {
    await publishRefused('flood', 20);
    await publishRefused('calm', 3);
    // Every refusal of the calm agent is lettered in full: its own budget.
    const calm = await waitFor(async () => {
      const found = await lettersOf('calm');
      return found.length === 3 ? found : undefined;
    }, 'the calm agent`s three letters');
    expect(calm.map((l) => [l.source, l.reason])).toEqual(Array(3).fill(['router-results', 'schema_violation']));
    // The flooding one: its budget, and no more while its minute lasts.
    await waitFor(async () => ((await lettersOf('flood')).length >= BUDGET ? true : undefined), 'the flooding agent`s letters');
    const consumer = await waitFor(async () => {
      const infos = await nats.jsm.consumers.list(batonStreamNames(prefix).inbox).next();
      const results = infos.find((c) => c.config.filter_subject?.includes('.result.'));
      return results !== undefined && results.num_pending === 0 && results.num_ack_pending === 0 ? results : undefined;
    }, 'the results consumer to settle every message');
    expect(consumer.delivered.stream_seq).toBeGreaterThanOrEqual(23);
    expect((await lettersOf('flood')).map((l) => l.reason)).toEqual(Array(BUDGET).fill('schema_violation'));

    // Stopping sums up the window still open: one letter for the 16 refusals without one.
    await router!.stop();
    router = null;
    const flood = await lettersOf('flood');
    expect(flood).toHaveLength(BUDGET + 1);
    expect(flood[BUDGET]).toMatchObject({
      source: 'router-results',
      reason: DeadLetterReason.refusalsSuppressed,
      body: { sender: 'acme/flood', suppressed: 20 - BUDGET, reasons: { schema_violation: 20 - BUDGET }, letters_per_window: BUDGET },
    });
    expect(await lettersOf('calm')).toHaveLength(3);
  }, 60_000);
});
