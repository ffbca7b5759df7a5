import { randomBytes } from 'node:crypto';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { BatonSdkErrorCodes, createBatonClient, decisions, InvalidInputError, renderSentinel, SdkErrorCode, type BatonAgent } from './index';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * No self re-entry (docs/routing.md rule 7): the router ignores an agent's call of itself, so the
 * agent's decision silently becomes something else (the no-action default). The SDK knows who
 * publishes: a result whose decision (typed, or the body's AGENT_RUN_CONFIG sentinel when there is
 * no typed one) calls the publishing agent is refused before anything is sent — InvalidInputError,
 * code `self_call`. Against the real NATS, with streams of its own: nothing reaches the inbox stream.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

describe('a result calling the publishing agent itself is refused by the SDK (self_call, real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let agent: BatonAgent;
  const result = (extra: object) => ({
    result_id: `r-${randomBytes(4).toString('hex')}`,
    run_id: 'r',
    workflow_run_id: 'wr-1',
    handoff_id: 'h',
    claim_id: 'c',
    ...extra,
  });
  const inboxMessages = async () => (await nats.jsm.streams.info(batonStreamNames(prefix).inbox)).state.messages;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-self-call-int', reconnect: false });
    prefix = `sc${randomBytes(5).toString('hex')}`;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    agent = await createBatonClient({ nats, prefix, project: 'shop', agent: 'writer' });
  });

  afterAll(async () => {
    await agent.close();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.drain();
    }
  });

  it('SdkErrorCode.selfCall is self_call, an InvalidInputError code in BatonSdkErrorCodes', () => {
    expect(SdkErrorCode.selfCall).toBe('self_call');
    expect(BatonSdkErrorCodes.has('self_call')).toBe(true);
  });

  it('decisions.callAgent(<self>) as the typed decision, with or without a callback: refused, typed, nothing sent', async () => {
    for (const decision of [decisions.callAgent('writer'), decisions.callAgent('writer', 'editor')]) {
      const refused = await agent.publishResult(result({ decision })).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(InvalidInputError);
      expect(refused).toMatchObject({
        name: 'InvalidInputError',
        code: 'self_call',
        what: 'agent result',
        rejection: { code: 'schema_violation', issues: [{ path: 'decision.function_call.agent_name', code: 'self_call' }] },
      });
    }
    expect(await inboxMessages()).toBe(0);
  });

  it('a self call in the body’s sentinel (no typed decision) is refused too; a typed decision wins over it, as the router reads it', async () => {
    const body = `done\n\n${renderSentinel(decisions.callAgent('writer'))}`;
    const refused = await agent.publishResult(result({ body })).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect(refused).toMatchObject({ code: 'self_call', rejection: { issues: [{ path: 'body', code: 'self_call' }] } });
    expect(await inboxMessages()).toBe(0);

    // The router reads the typed decision and never the sentinel then: the result is taken.
    const taken = await agent.publishResult(result({ body, decision: decisions.advance() }));
    expect(taken).toMatchObject({ duplicate: false });
    expect(await inboxMessages()).toBe(1);
  });

  it('a call of another agent (with the publishing agent as its callback, the default anyway) is published', async () => {
    const before = await inboxMessages();
    await agent.publishResult(result({ decision: decisions.callAgent('researcher', 'writer') }));
    expect(await inboxMessages()).toBe(before + 1);
  });
});
