import { batonStreamNames, batonTopology, connectNats, provision, PublishTimeout, type NatsHandle } from '@baton/eventstore';
import { AgentSubjects, createBatonClient, startMesh, type BatonAgent } from '@baton/sdk';
import { removeServers, sleep, startNatsServer, type ServerProcess } from '../faults/harness';

/*
 * A publish the stream does not acknowledge in time may or may not be stored. The SDK sends it
 * again under the same Nats-Msg-Id (`publishAttempts`, `publishTimeoutMs`), so the caller gets the
 * stream's answer instead of a timeout whenever the server answers within the attempts, and the
 * message is stored once however many copies reach it. The server is a private nats-server on a
 * free loopback port, paused with SIGSTOP: a publish then sits in the socket unanswered, as under a
 * stalled or overloaded server; the shared NATS other tests use is never touched.
 */

describe('the SDK retries a publish that timed out under the same message id (private nats-server, SIGSTOP)', () => {
  const prefix = 'rt';
  let server: ServerProcess;
  let nats: NatsHandle;
  const clients: BatonAgent[] = [];
  const client = async (options: { publishAttempts?: number; publishTimeoutMs?: number }) => {
    const c = await createBatonClient({ nats, prefix, project: 'alpha', agent: 'coder', ...options });
    clients.push(c);
    return c;
  };
  const storedOn = async (subject: string) => {
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  };

  beforeAll(async () => {
    server = await startNatsServer();
    nats = await connectNats({ servers: server.url, name: 'sdk-publish-retry', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
  });

  const waitUntil = async (done: () => boolean) => {
    for (const deadline = Date.now() + 10_000; !done(); await sleep(5)) if (Date.now() > deadline) throw new Error('the client did not publish in 10 s');
  };

  afterEach(async () => {
    server.resume();
    for (const c of clients.splice(0)) await c.close();
  });

  afterAll(async () => {
    await nats?.close();
    await removeServers(server === undefined ? [] : [server]);
  });

  it('a server that answers during the second attempt: the start resolves with the first copy’s sequence (duplicate: true), stored once', async () => {
    // Watch the client's publishes: the server is resumed once the first attempt has timed out and
    // the second has gone out (a fixed sleep raced a busy machine, where the first copy could go
    // out late and be answered itself).
    const attempts: Promise<unknown>[] = [];
    const watched = new Proxy(nats, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (key !== 'js') return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        return new Proxy(nats.js, {
          get(js, name, jsReceiver) {
            const member = Reflect.get(js, name, jsReceiver) as unknown;
            if (name !== 'publish') return typeof member === 'function' ? (member as (...a: unknown[]) => unknown).bind(js) : member;
            return (...args: Parameters<NatsHandle['js']['publish']>) => {
              const sent = js.publish(...args);
              attempts.push(sent.catch((error: unknown) => error));
              return sent;
            };
          },
        });
      },
    });
    const c = await createBatonClient({ nats: watched, prefix, project: 'alpha', agent: 'coder', publishAttempts: 3, publishTimeoutMs: 1000 });
    clients.push(c);
    await server.pause();
    const started = Date.now();
    const receipt = c.startRun({ workflow_run_id: 'wr-1', workflow: 'ship', started_by: 'sam' });
    // The first attempt times out at 1 s; the second goes out 0.2 s later. Resume in between them.
    await waitUntil(() => attempts.length >= 1);
    await attempts[0];
    await waitUntil(() => attempts.length >= 2);
    server.resume();
    const answered = await receipt;
    const subject = AgentSubjects.agentRunStart(prefix, 'alpha', 'coder');
    // The paused first copy was stored when the server resumed; the second is its duplicate.
    expect(answered).toMatchObject({ duplicate: true, stream: batonStreamNames(prefix).inbox });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(await storedOn(subject)).toBe(1);
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: answered.seq });
    expect(stored.subject).toBe(subject);
    expect(stored.header.get('Nats-Msg-Id')).toBe('start:alpha:wr-1');
  });

  it('a server that answers none of the attempts: PublishTimeout with attempts and msgId; once it answers, the same start is its own duplicate, stored once', async () => {
    const agent = await client({ publishAttempts: 2, publishTimeoutMs: 400 });
    await server.pause();
    const failure = await agent.startRun({ workflow_run_id: 'wr-2', workflow: 'ship', started_by: 'sam' }).catch((e: unknown) => e);
    server.resume();
    expect(failure).toBeInstanceOf(PublishTimeout);
    expect(failure).toMatchObject({ code: 'publish_timeout', attempts: 2, msgId: 'start:alpha:wr-2' });
    expect((failure as Error).message).toContain('after 2 attempts under message id start:alpha:wr-2');

    // What the error says to do: publish the same start again. The paused copies were stored once.
    const again = await agent.startRun({ workflow_run_id: 'wr-2', workflow: 'ship', started_by: 'sam' });
    expect(again.duplicate).toBe(true);
    expect(await storedOn(AgentSubjects.agentRunStart(prefix, 'alpha', 'coder'))).toBe(2); // wr-1 and wr-2
  });

  it('one attempt (publishAttempts 1) is not retried: the timeout comes after one publishTimeoutMs', async () => {
    const agent = await client({ publishAttempts: 1, publishTimeoutMs: 300 });
    await server.pause();
    const started = Date.now();
    const failure = await agent
      .publishResult({ result_id: 'r-1', run_id: 'run-1', workflow_run_id: 'wr-1', body: 'done', handoff_id: 'h-1', claim_id: 'c-1' })
      .catch((e: unknown) => e);
    const waited = Date.now() - started;
    server.resume();
    expect(failure).toMatchObject({ name: 'PublishTimeout', attempts: 1 });
    expect(waited).toBeLessThan(1500); // three attempts would take at least 3 × 300 + 200 ms of waits
  });

  it('a mesh start through the client’s mesh publisher is retried the same way', async () => {
    const agent = await client({ publishAttempts: 3, publishTimeoutMs: 1000 });
    await server.pause();
    const receipt = startMesh(agent.meshPublisher(), {
      mesh_run_id: 'm-1',
      project: 'alpha',
      mesh: 'review',
      started_by: 'sam',
      input: 'review the change',
    });
    await sleep(1500);
    server.resume();
    await expect(receipt).resolves.toMatchObject({ duplicate: true });
  });

  it('settings that could outlast the duplicate window, or are not numbers of attempts, are refused before connecting (RangeError)', async () => {
    await expect(createBatonClient({ natsUrl: server.url, project: 'alpha', agent: 'coder', publishAttempts: 13, publishTimeoutMs: 5000 })).rejects.toThrow(
      /exceeds 60000 ms, half the stream's 2-minute duplicate window/,
    );
    await expect(createBatonClient({ natsUrl: server.url, project: 'alpha', agent: 'coder', publishAttempts: 0 })).rejects.toBeInstanceOf(RangeError);
    await expect(createBatonClient({ natsUrl: server.url, project: 'alpha', agent: 'coder', publishTimeoutMs: -1 })).rejects.toThrow(/publishTimeoutMs/);
  });
});
