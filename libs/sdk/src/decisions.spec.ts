import { AgentRunConfigSchema, parseSentinel } from '@baton/contracts';
import {
  appendSentinelOnce,
  BatonSdkError,
  DuplicateMessageError,
  InvalidInputError,
  MeshBuildError,
  NotClaimedError,
  OfferTerminatedError,
  decisions,
  renderSentinel,
} from './index';

describe('decision helpers produce typed AgentRunConfigs', () => {
  it('each helper yields the config the seed names, valid against AgentRunConfigSchema', () => {
    expect(decisions.advance()).toEqual({ dispatch: { status: 'advance' } });
    expect(decisions.hold('needs a human')).toEqual({ dispatch: { status: 'hold', reason: 'needs a human' } });
    expect(decisions.terminate('done')).toEqual({ dispatch: { status: 'terminate', reason: 'done' } });
    expect(decisions.loop()).toEqual({ dispatch: { status: 'loop' } });
    expect(decisions.task('review')).toEqual({ task: 'review' });
    expect(decisions.callAgent('researcher')).toEqual({ function_call: { function: 'call_agent', agent_name: 'researcher' } });
    expect(decisions.callAgent('researcher', 'writer')).toEqual({ function_call: { function: 'call_agent', agent_name: 'researcher', callback: 'writer' } });
    for (const config of [decisions.advance('x'), decisions.task('t'), decisions.callAgent('a', 'b')]) {
      expect(AgentRunConfigSchema.safeParse(config).success).toBe(true);
    }
  });

  it('a malformed agent name is refused at build time, not by the router later, with a typed error naming the field', () => {
    const refusal = (build: () => unknown) => {
      try {
        build();
      } catch (error) {
        return error;
      }
      return undefined;
    };
    const bad = refusal(() => decisions.callAgent('two words'));
    expect(bad).toBeInstanceOf(InvalidInputError);
    expect({ code: (bad as InvalidInputError).code, paths: (bad as InvalidInputError).rejection.issues.map((issue) => issue.path) }).toEqual({
      code: 'schema_violation',
      paths: ['function_call.agent_name'],
    });
    expect(refusal(() => decisions.task(''))).toMatchObject({ name: 'InvalidInputError', code: 'schema_violation' });
  });

  it('every error the SDK throws on purpose carries a stable code (a client never parses a message)', () => {
    const codes = [
      new NotClaimedError('h-1', 'finish'),
      new DuplicateMessageError('result:p:r-1', 'x.in.p.result.a', 'X_INBOX', 7),
      new OfferTerminatedError('x.in.p.offer.a', 9, 5),
      new MeshBuildError([]),
      new BatonSdkError('anything else'),
    ].map((error) => [error.name, error.code]);
    expect(codes).toEqual([
      ['NotClaimedError', 'not_claimed'],
      ['DuplicateMessageError', 'duplicate_message_id'],
      ['OfferTerminatedError', 'offer_terminated'],
      ['MeshBuildError', 'mesh_invalid'],
      ['BatonSdkError', 'sdk_error'],
    ]);
  });

  it('legacy agents: the re-exported sentinel helpers round-trip a decision through a comment body exactly once', () => {
    const config = decisions.callAgent('researcher', 'writer');
    const body = appendSentinelOnce(appendSentinelOnce('Here is my plan.', config), config);
    expect(body.match(/AGENT_RUN_CONFIG/g)).toHaveLength(1);
    expect(body.endsWith(renderSentinel(config))).toBe(true);
    expect(parseSentinel(body)).toEqual({ kind: 'config', config });
  });
});
