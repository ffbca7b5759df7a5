import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { headers as natsHeaders } from 'nats';
import { claimWithdrawnSubject, inboxPrefixOf, ledgerCommandSubject, MsgIds, Principals, type Principal } from '@baton/contracts';
import { batonStreamNames, connectNats, DeadLetterReason, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsServer, type PrivateNatsServer } from '../../../libs/eventstore/src/int/servers';
import { LEDGER_DLQ_SOURCE } from './commands/ledger-commands';
import { EDGE_DLQ_SOURCE } from './edge/agent-edge';
import { bootLedger, connectTest, deadLetters, deleteStreams, DlqHeader, messagesOn, randomPrefix } from './int/support';

/*
 * Where the ledger answers a command and where the agent edge relays a message (JetStream then
 * answers on its reply subject): one decision (`replyRefusal`, libs/contracts/src/reply-subject.ts).
 * Without NATS authentication clients keep NATS's default inbox, so `_INBOX.` is answered — but a
 * reply subject under Baton's own subjects (`<prefix>.…`) never is: the answer would be published
 * onto them (into the inbox stream, say). With authentication — a credentials file or, here, a
 * NATS user and password — only the sender's own inbox is. Each refusal is answered nowhere and
 * recorded `reply_not_allowed`.
 */

const P = 'acme';
const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** How long a published message is given to arrive where it should not, after a flush round trip. */
const SETTLE_MS = 300;

/** Listen on `subjects` and keep what arrives on each. */
function trap(handle: NatsHandle, subjects: readonly string[]): { heard: Array<{ subject: string; body: string }>; stop(): void } {
  const heard: Array<{ subject: string; body: string }> = [];
  const subs = subjects.map((subject) =>
    handle.connection.subscribe(subject, { callback: (_err, msg) => heard.push({ subject: msg.subject, body: decoder.decode(msg.data) }) }),
  );
  return { heard, stop: () => subs.forEach((sub) => sub.unsubscribe()) };
}

/** A claim of a handoff that does not exist, as `principal` of project P, with `reply` as its reply subject (its key tells the letters apart). */
function sendClaim(handle: NatsHandle, prefix: string, principal: Principal, reply: string, key: string): void {
  const body = encoder.encode(JSON.stringify({ handoff_id: 'h-none', idempotency_key: key }));
  handle.connection.publish(ledgerCommandSubject(prefix, P, principal, 'claim'), body, { reply });
}

/** A result of `agent` that the edge relays (its own id, a body its consumer reads), and its edge subject. */
function edgeResult(prefix: string, agent: string, id: string) {
  const headers = natsHeaders();
  headers.set('Nats-Msg-Id', MsgIds.result(P, 'run-1', id));
  const result = { result_id: id, run_id: 'ar-1', project: P, workflow_run_id: 'run-1', agent, produced_at: new Date().toISOString() };
  return { subject: `${prefix}.edge.${P}.result.${agent}`, data: encoder.encode(JSON.stringify(result)), headers };
}

/** The `reply_not_allowed` letters of `source`, as `<letter's subject> <its detail>`, once there are `count`. */
async function replyLetters(handle: NatsHandle, prefix: string, source: string, count: number): Promise<string[]> {
  return waitFor(
    async () => {
      const letters = (await deadLetters(handle, prefix, source)).filter((l) => l.header(DlqHeader.reason) === DeadLetterReason.replyNotAllowed);
      return letters.length >= count ? letters.map((l) => `${l.header(DlqHeader.subject)} ${l.header(DlqHeader.detail)}`) : undefined;
    },
    `${count} reply_not_allowed letters from ${source}`,
    { timeoutMs: 15_000 },
  );
}

async function settle(handle: NatsHandle): Promise<void> {
  await handle.connection.flush();
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

describe('reply subjects without NATS authentication (the shared server): NATS`s default inbox is answered, Baton`s own subjects never', () => {
  const prefix = randomPrefix();
  const inboxStream = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService;

  beforeAll(async () => {
    nats = await connectTest('ledger-reply-subjects-int');
    ledger = await bootLedger(prefix, 'ledger-replies', { BATON_NATS_AUTH: 'none' });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('the ledger answers a command on _INBOX. (and on another agent`s inbox); on <prefix>.zz.reply, an inbox subject or a notice subject it answers nothing and records reply_not_allowed', async () => {
    const support = Principals.agent(P, 'support');
    const refused = [`${prefix}.zz.reply`, `${prefix}.in.${P}.result.x`, claimWithdrawnSubject(prefix, P, 'billing')];
    const allowed = [`_INBOX.${prefix}.x`, `${inboxPrefixOf(prefix, Principals.agent(P, 'billing'))}.x`];
    const listening = trap(nats, [...refused, ...allowed]);
    await nats.connection.flush();
    refused.forEach((reply, i) => sendClaim(nats, prefix, support, reply, `k-refused-${i}`));
    await nats.connection.flush();

    const letters = await replyLetters(nats, prefix, LEDGER_DLQ_SOURCE, refused.length);
    const command = ledgerCommandSubject(prefix, P, support, 'claim');
    expect(letters.sort()).toEqual(
      [
        `${command} reply subject ${prefix}.zz.reply is under Baton's own subjects (${prefix}.…): the answer would be published onto them`,
        `${command} reply subject ${prefix}.in.${P}.result.x is under Baton's own subjects (${prefix}.…): the answer would be published onto them`,
        `${command} reply subject ${refused[2]} is an agent's notice subject: the answer would be read as a notice`,
      ].sort(),
    );

    // The ledger keeps serving: the same command with a reply subject outside Baton's is answered (not_found: there is no such handoff).
    allowed.forEach((reply, i) => sendClaim(nats, prefix, support, reply, `k-allowed-${i}`));
    await waitFor(() => listening.heard.length >= allowed.length, 'the answers on the allowed reply subjects');
    await settle(nats);
    listening.stop();
    expect(listening.heard.map((h) => h.subject).sort()).toEqual([...allowed].sort());
    for (const h of listening.heard) expect(JSON.parse(h.body)).toMatchObject({ ok: false, error: { code: 'not_found' } });
    // Nothing was published onto Baton's inbox subject.
    expect(await messagesOn(nats, inboxStream, `${prefix}.in.${P}.result.x`)).toEqual([]);
  });

  it('the edge relays a result whose reply is _INBOX. (JetStream`s ack arrives there) and relays nowhere one whose reply is under <prefix>.: reply_not_allowed, nothing stored', async () => {
    const misdirected = `${prefix}.in.${P}.result.mallory`;
    const listening = trap(nats, [misdirected]);
    await nats.connection.flush();
    const refused = edgeResult(prefix, 'bob', 'r-misdirected');
    nats.connection.publish(refused.subject, refused.data, { headers: refused.headers, reply: misdirected });
    await nats.connection.flush();
    expect(await replyLetters(nats, prefix, EDGE_DLQ_SOURCE, 1)).toEqual([
      `${refused.subject} reply subject ${misdirected} is under Baton's own subjects (${prefix}.…): the answer would be published onto them`,
    ]);

    // NATS's default inbox (the client's `_INBOX.`): relayed, and JetStream's ack comes back there.
    const good = edgeResult(prefix, 'bob', 'r-good');
    const ack = await nats.connection.request(good.subject, good.data, { headers: good.headers, timeout: 10_000 });
    expect(ack.subject.startsWith('_INBOX.')).toBe(true);
    expect(JSON.parse(decoder.decode(ack.data))).toMatchObject({ stream: inboxStream });

    await settle(nats);
    listening.stop();
    expect(listening.heard).toEqual([]);
    expect(await messagesOn(nats, inboxStream, misdirected)).toEqual([]);
    const stored = await messagesOn(nats, inboxStream, `${prefix}.in.${P}.result.bob`);
    expect(stored.map((m) => (m.json() as { result_id: string }).result_id)).toEqual(['r-good']);
  });
});

describe('reply subjects with NATS authentication by user and password (a server of the test`s own): only the sender`s own inbox', () => {
  const prefix = randomPrefix();
  const inboxStream = batonStreamNames(prefix).inbox;
  const support = Principals.agent(P, 'support');
  const billingInbox = inboxPrefixOf(prefix, Principals.agent(P, 'billing'));
  const passwords = { ledger: randomBytes(12).toString('hex'), test: randomBytes(12).toString('hex') };
  let dir: string;
  let server: PrivateNatsServer;
  let ledger: RunningService;
  /** The test's own user: reads the streams and listens where answers must not go. */
  let observer: NatsHandle;
  /** Agent `support` of P, on the library's inbox prefix set to its own inbox. */
  let agent: NatsHandle;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'baton-reply-subjects-'));
    const config = join(dir, 'nats.conf');
    writeFileSync(
      config,
      `authorization {\n  users = [\n    { user: "ledger", password: "${passwords.ledger}" }\n    { user: "test", password: "${passwords.test}" }\n  ]\n}\n`,
    );
    server = await startNatsServer({ config, jetstream: true });
    ledger = await bootLedger(prefix, 'ledger-replies-user', {
      NATS_URL: server.url,
      BATON_NATS_AUTH: 'creds',
      NATS_USER: 'ledger',
      NATS_PASSWORD: passwords.ledger,
    });
    observer = await connectNats({ servers: server.url, user: 'test', pass: passwords.test, reconnect: false });
    agent = await connectNats({
      servers: server.url,
      user: 'test',
      pass: passwords.test,
      inboxPrefix: inboxPrefixOf(prefix, support),
      reconnect: false,
      checkJetStream: false,
    });
  }, 60_000);

  afterAll(async () => {
    await ledger?.stop();
    await agent?.close().catch(() => undefined);
    await observer?.close().catch(() => undefined);
    // The streams live in the server's own store: removed with it.
    await server?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the ledger answers a command only on the sender`s own inbox: another agent`s inbox and NATS`s default inbox get nothing, each recorded reply_not_allowed', async () => {
    const refused = [`${billingInbox}.trap`, '_INBOX.trap'];
    const listening = trap(observer, refused);
    await observer.connection.flush();
    refused.forEach((reply, i) => sendClaim(agent, prefix, support, reply, `k-foreign-${i}`));
    await agent.connection.flush();

    const letters = await replyLetters(observer, prefix, LEDGER_DLQ_SOURCE, refused.length);
    const command = ledgerCommandSubject(prefix, P, support, 'claim');
    expect(letters.sort()).toEqual(
      refused.map((reply) => `${command} reply subject ${reply} is not under agent ${P}/support's inbox ${inboxPrefixOf(prefix, support)}`).sort(),
    );

    // Its own inbox is answered (not_found: there is no such handoff).
    const own = await agent.connection.request(command, encoder.encode(JSON.stringify({ handoff_id: 'h-none', idempotency_key: 'k-own' })), {
      timeout: 10_000,
    });
    expect(own.subject.startsWith(`${inboxPrefixOf(prefix, support)}.`)).toBe(true);
    expect(JSON.parse(decoder.decode(own.data))).toMatchObject({ ok: false, error: { code: 'not_found' } });
    await settle(observer);
    listening.stop();
    expect(listening.heard).toEqual([]);
  });

  it('the edge relays nowhere a result whose reply is another agent`s inbox (reply_not_allowed) and relays one whose reply is the agent`s own', async () => {
    const foreign = `${billingInbox}.edge-trap`;
    const listening = trap(observer, [foreign]);
    await observer.connection.flush();
    const refused = edgeResult(prefix, 'support', 'r-foreign');
    agent.connection.publish(refused.subject, refused.data, { headers: refused.headers, reply: foreign });
    await agent.connection.flush();
    expect(await replyLetters(observer, prefix, EDGE_DLQ_SOURCE, 1)).toEqual([
      `${refused.subject} reply subject ${foreign} is not under the inbox of agent ${P}/support`,
    ]);

    const good = edgeResult(prefix, 'support', 'r-own');
    const ack = await agent.connection.request(good.subject, good.data, { headers: good.headers, timeout: 10_000 });
    expect(JSON.parse(decoder.decode(ack.data))).toMatchObject({ stream: inboxStream });
    await settle(observer);
    listening.stop();
    expect(listening.heard).toEqual([]);
    const stored = await messagesOn(observer, inboxStream, `${prefix}.in.${P}.result.support`);
    expect(stored.map((m) => (m.json() as { result_id: string }).result_id)).toEqual(['r-own']);
  });
});
