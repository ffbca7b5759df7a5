import { AgentRunConfigSchema, parseSentinel } from '@baton/contracts';
import { appendSentinelOnce, decisions, renderSentinel } from './index';

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

  it('a malformed agent name is refused at build time, not by the router later', () => {
    expect(() => decisions.callAgent('two words')).toThrow();
    expect(() => decisions.task('')).toThrow();
  });

  it('legacy agents: the re-exported sentinel helpers round-trip a decision through a comment body exactly once', () => {
    const config = decisions.callAgent('researcher', 'writer');
    const body = appendSentinelOnce(appendSentinelOnce('Here is my plan.', config), config);
    expect(body.match(/AGENT_RUN_CONFIG/g)).toHaveLength(1);
    expect(body.endsWith(renderSentinel(config))).toBe(true);
    expect(parseSentinel(body)).toEqual({ kind: 'config', config });
  });
});
