import { Limits, parseSentinel, postedBodyOf, type AgentResult } from '@baton/contracts';
import type { HandoffClaimView } from '../claims';
import type { RecordResult } from './commands';
import { runDecider } from './decide';
import type { RunEvent } from './state';
import { agents, meta, RUN, result, startCmd, workflow } from './test-helpers';

/*
 * Seed 000: the sentinel is engine-rendered from the typed decision and appended to the posted
 * body exactly once. The run keeps what each agent said on each turn (`posted_body` on
 * `run.result_recorded`), with exactly one canonical sentinel for the decision taken.
 */
const ENTRY_HANDOFF = `ho-s-${RUN}`;
const claim: HandoffClaimView = { handoff_id: ENTRY_HANDOFF, status: 'claimed', claim: { claim_id: 'c-1', claimed_by: 'issue' } };
const sentinels = (text: string) => (text.match(/AGENT_RUN_CONFIG/g) ?? []).length;

function recorded(extra: Partial<AgentResult>): RunEvent & { type: 'run.result_recorded' } {
  const start = runDecider.decide(startCmd(), runDecider.initialState());
  if (!start.ok) throw new Error(start.error.code);
  const state = start.events.reduce(runDecider.evolve, runDecider.initialState());
  const command: RecordResult = {
    type: 'record_result',
    data: { result: result('r1', 'issue', { handoff_id: ENTRY_HANDOFF, claim_id: 'c-1', ...extra }), workflow, agents, handoff: claim },
    metadata: meta,
  };
  const decided = runDecider.decide(command, state);
  if (!decided.ok) throw new Error(`${decided.error.code}: ${decided.error.message}`);
  const event = decided.events.find((e) => e.type === 'run.result_recorded');
  if (!event || event.type !== 'run.result_recorded') throw new Error('no run.result_recorded');
  return event;
}

describe('seed 000: the posted body carries exactly one sentinel', () => {
  it('given a body that already holds a sentinel and a typed decision beside it, the run keeps the words with exactly one sentinel: the typed decision', () => {
    const body = 'Context gathered.\n<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"hold"}} -->\nMore notes.\n<!-- AGENT_RUN_CONFIG {"task":"builder"} -->';
    const event = recorded({ body, decision: { dispatch: { status: 'advance' } } });
    const posted = event.data.posted_body ?? '';
    expect(sentinels(posted)).toBe(1);
    expect(posted).toContain('Context gathered.');
    expect(posted).toContain('More notes.');
    expect(parseSentinel(posted)).toEqual({ kind: 'config', config: { dispatch: { status: 'advance' } } });
  });

  it('given a body whose sentinel is the decision, the posted body has it once, rendered canonically', () => {
    const event = recorded({ body: 'Done.\n<!--AGENT_RUN_CONFIG   {"dispatch": {"status":"advance"}}-->' });
    const posted = event.data.posted_body ?? '';
    expect(sentinels(posted)).toBe(1);
    expect(posted.endsWith('<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} -->')).toBe(true);
  });

  it('given a decision that claims engine_fallback provenance, the posted sentinel records it as the agent`s (provenance is Baton`s, seed 000 §5)', () => {
    const event = recorded({ body: 'a\n<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"hold","reason":"r","origin":"engine_fallback"}} -->' });
    const posted = event.data.posted_body ?? '';
    expect(parseSentinel(posted)).toEqual({ kind: 'config', config: { dispatch: { status: 'hold', reason: 'r', origin: 'agent' } } });
    // A typed decision's claim is recorded the same way; an agent's own `agent` claim is kept as written.
    const typed = recorded({ decision: { dispatch: { status: 'hold', origin: 'engine_fallback' } } });
    expect(parseSentinel(typed.data.posted_body ?? '')).toEqual({ kind: 'config', config: { dispatch: { status: 'hold', origin: 'agent' } } });
    const own = recorded({ decision: { dispatch: { status: 'hold', origin: 'agent' } } });
    expect(parseSentinel(own.data.posted_body ?? '')).toEqual({ kind: 'config', config: { dispatch: { status: 'hold', origin: 'agent' } } });
  });

  it('given no decision at all, the words are kept and no sentinel is invented', () => {
    const event = recorded({ body: 'I could not decide.' });
    expect(event.data.posted_body).toBe('I could not decide.');
  });

  it('given a broken sentinel, the broken marker is not kept as if it were a decision', () => {
    const event = recorded({ body: 'Hmm.\n<!-- AGENT_RUN_CONFIG {not json -->' });
    expect(sentinels(event.data.posted_body ?? '')).toBe(0);
    expect(event.data.posted_body).toBe('Hmm.');
  });

  it('caps what is kept, marks the cut, and still ends with the one decision', () => {
    const long = 'x'.repeat(Limits.maxPostedBodyChars + 500);
    const event = recorded({ body: long, decision: { task: 'builder' } });
    expect(event.data.posted_body_truncated).toBe(true);
    expect(sentinels(event.data.posted_body ?? '')).toBe(1);
    expect((event.data.posted_body ?? '').length).toBeLessThan(Limits.maxPostedBodyChars + 200);
  });

  it('is idempotent over its own output for the same decision', () => {
    const once = postedBodyOf('a\n<!-- AGENT_RUN_CONFIG {"task":"x"} -->', { task: 'builder' });
    expect(once).not.toBeNull();
    expect(postedBodyOf(once!.text, { task: 'builder' })).toEqual(once);
  });
});
