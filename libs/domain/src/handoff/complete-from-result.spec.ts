import { HandoffRecordSchema, type Evidence, type HandoffActorKind } from '@baton/contracts';
import { given } from '../testing/given';
import type { CompleteFromResult } from './commands';
import { handoffDecider } from './decider';
import { at, cmd, deriveId, history, HID, Ledger, meta } from './handoff.fixtures';
import { reactToHandoffEvent } from './policies';
import { toHandoffRecord } from './state';

const realEvidence: Evidence = { tests_run: ['parser.spec.ts: 12 passed'], work_product_id: 'pr-7' };

function completeFromResult(overrides: Partial<CompleteFromResult['data']> = {}, actorKind: HandoffActorKind = 'system', seconds = 20): CompleteFromResult {
  return {
    type: 'complete_from_result',
    data: {
      handoff_id: HID,
      result_id: 'r-1',
      agent: 'bob',
      workflow_run_id: 'wr-1',
      summary: 'parser written',
      evidence: realEvidence,
      idempotency_key: 'result:r-1',
      ...overrides,
    },
    metadata: meta('baton-router', actorKind, at(seconds)),
  };
}

describe('handoff: complete_from_result (a router-dispatched handoff closes without a handback)', () => {
  it('pending → completed, carrying the result_id and the result`s evidence; no handback is created', () => {
    const result = given(handoffDecider, history(cmd.create({ to_agent: 'bob' }))).when(completeFromResult());
    const [event] = result.then([
      {
        type: 'handoff.completed_by_result',
        data: {
          handoff_id: HID,
          at: at(20),
          idempotency_key: 'result:r-1',
          result_id: 'r-1',
          agent: 'bob',
          workflow_run_id: 'wr-1',
          recorded_by: 'baton-router',
          report: { summary: 'parser written', files_changed: [], verification: '', next_steps: '', outcome: 'completed', evidence: realEvidence },
        },
      },
    ]);
    const state = result.stateAfter();
    const record = toHandoffRecord(state);
    expect(record).toMatchObject({ status: 'completed', completed_at: at(20), result_id: 'r-1', completion_report: { evidence: realEvidence } });
    expect(record).not.toHaveProperty('handback_id');
    expect(HandoffRecordSchema.safeParse(record).success).toBe(true);
    expect(reactToHandoffEvent(event!, { state, deriveId })).toEqual([]);
  });

  it('claimed → completed: the claim that did the work is kept, the lease is no longer shown', () => {
    const state = given(handoffDecider, history(cmd.create(), cmd.claim('bob', 'c1')))
      .when(completeFromResult())
      .stateAfter();
    const record = toHandoffRecord(state);
    expect(record).toMatchObject({ status: 'completed', claimed_by: 'bob', result_id: 'r-1' });
    expect(record).not.toHaveProperty('lease_expires_at');
    expect(HandoffRecordSchema.safeParse(record).success).toBe(true);
  });

  it('evidence floor as on returns: a result with no tests_run, artifacts or work_product_id is stored as partial with evidence_floor', () => {
    for (const evidence of [{}, { tests_run: [{}] }, { artifacts: ['n/a'], work_product_id: '  ' }] as Evidence[]) {
      const result = given(handoffDecider, history(cmd.create())).when(completeFromResult({ evidence }));
      result.thenMatch([
        {
          type: 'handoff.completed_by_result',
          data: expect.objectContaining({
            report: expect.objectContaining({ outcome: 'partial', evidence }),
            evidence_floor: { applied: true, original_outcome: 'completed', reason: 'no_evidence' },
          }),
        },
      ]);
      expect(HandoffRecordSchema.safeParse(toHandoffRecord(result.stateAfter())).success).toBe(true);
    }
  });

  it('idempotent by idempotency_key: the same result delivered twice completes the handoff once', () => {
    const events = history(cmd.create(), completeFromResult());
    given(handoffDecider, events).when(completeFromResult()).then([]);
  });

  it('only the router (actor kind system) may issue it: agents, operators and the watchdog are refused with internal_command', () => {
    for (const kind of ['agent', 'operator', 'human', 'watchdog'] as const) {
      given(handoffDecider, history(cmd.create())).when(completeFromResult({}, kind)).thenFails('internal_command');
    }
  });

  it('refused with handoff_not_open once the handoff is returned, completed or ended', () => {
    const returned = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.ret('bob', 'c1'));
    given(handoffDecider, returned).when(completeFromResult()).thenFails('handoff_not_open');
    const completed = history(cmd.create(), completeFromResult());
    given(handoffDecider, completed)
      .when(completeFromResult({ result_id: 'r-2', idempotency_key: 'result:r-2' }))
      .thenFails('handoff_not_open');
    const abandoned = history(cmd.create(), cmd.abandon('alice'));
    given(handoffDecider, abandoned).when(completeFromResult()).thenFails('handoff_not_open');
  });

  it("a person's abandon after the run recorded the result (the ledger read it: result_recorded) is refused result_already_recorded; Baton's own abandon is not held back", () => {
    const recorded = { workflow_run_id: 'wr-1', result_id: 'r-1', agent: 'bob' };
    const abandonAs = (actor: string, kind: HandoffActorKind) => {
      const command = cmd.abandon(actor, kind) as Extract<ReturnType<typeof cmd.abandon>, { type: 'abandon' }>;
      return { ...command, data: { ...command.data, result_recorded: recorded } };
    };
    const claimed = history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c1'));
    const refused = given(handoffDecider, claimed).when(abandonAs('olga', 'operator'));
    refused.thenFails('result_already_recorded');
    expect(refused.result).toMatchObject({
      ok: false,
      error: { kind: 'wrong_state', details: { handoff_id: HID, workflow_run_id: 'wr-1', result_id: 'r-1' } },
    });
    given(handoffDecider, history(cmd.create({ to_agent: 'bob' })))
      .when(abandonAs('alice', 'agent'))
      .thenFails('result_already_recorded');
    given(handoffDecider, claimed)
      .when(abandonAs('baton-router', 'system'))
      .thenMatch([{ type: 'handoff.abandoned' }]);
  });

  describe('rule 4a: a result accepted under a claim before its requeue landed voids the lapse', () => {
    // bob's claim c1 ran out at 60 s; the router had accepted his result r-1 under c1 before that,
    // but the watchdog's requeue reached the ledger (61 s) before the router's completion (62 s).
    const lapsed = () => history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61));

    it('pending after the lapse → completed, naming the voided lapse and restoring the retry count', () => {
      const result = given(handoffDecider, lapsed()).when(completeFromResult({ claim_id: 'c1' }, 'system', 62));
      result.thenMatch([
        {
          type: 'handoff.completed_by_result',
          data: expect.objectContaining({ result_id: 'r-1', agent: 'bob', lapse_voided: { claim_id: 'c1', claimer: 'bob', retry_count: 0 } }),
        },
      ]);
      const record = toHandoffRecord(result.stateAfter());
      expect(record).toMatchObject({ status: 'completed', result_id: 'r-1', retry: { retry_count: 0 } });
      expect(HandoffRecordSchema.safeParse(record).success).toBe(true);
    });

    it('the same when another agent claimed the re-offer first: the completion ends that claim too', () => {
      const events = history(cmd.create(), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61), cmd.claim('carol', 'c2', 61.5));
      const result = given(handoffDecider, events).when(completeFromResult({ claim_id: 'c1' }, 'system', 62));
      result.thenMatch([
        { type: 'handoff.completed_by_result', data: expect.objectContaining({ lapse_voided: { claim_id: 'c1', claimer: 'bob', retry_count: 0 } }) },
      ]);
      expect(toHandoffRecord(result.stateAfter())).toMatchObject({ status: 'completed', retry: { retry_count: 0 } });
    });

    it('only the claim that lapsed last: a result naming no claim, or another claim, voids nothing', () => {
      const twice = history(cmd.create({ to_agent: 'bob' }), cmd.claim('bob', 'c1'), cmd.requeue('c1', 61), cmd.claim('bob', 'c2', 62), cmd.requeue('c2', 130));
      for (const claim of [undefined, 'c1', 'c9']) {
        const result = given(handoffDecider, twice).when(completeFromResult(claim === undefined ? {} : { claim_id: claim }, 'system', 131));
        const [event] = result.thenMatch([{ type: 'handoff.completed_by_result' }]);
        expect(event!.data).not.toHaveProperty('lapse_voided');
        expect(toHandoffRecord(result.stateAfter())).toMatchObject({ retry: { retry_count: 2 } });
      }
      const voided = given(handoffDecider, twice).when(completeFromResult({ claim_id: 'c2' }, 'system', 131));
      voided.thenMatch([
        { type: 'handoff.completed_by_result', data: expect.objectContaining({ lapse_voided: { claim_id: 'c2', claimer: 'bob', retry_count: 1 } }) },
      ]);
      expect(toHandoffRecord(voided.stateAfter())).toMatchObject({ retry: { retry_count: 1 } });
    });

    it('a result under the live claim voids nothing: there was no lapse', () => {
      const result = given(handoffDecider, history(cmd.create(), cmd.claim('bob', 'c1'))).when(completeFromResult({ claim_id: 'c1' }));
      const [event] = result.thenMatch([{ type: 'handoff.completed_by_result' }]);
      expect(event!.data).not.toHaveProperty('lapse_voided');
    });
  });

  it('a completion handback is decided, never closed by a result (not_returnable); an unknown handoff is not_found', () => {
    const ledger = new Ledger();
    ledger.send(HID, cmd.create());
    ledger.send(HID, cmd.claim('bob', 'c1'));
    ledger.send(HID, cmd.ret('bob', 'c1'));
    const handback = ledger.send('hb-c1', { ...completeFromResult({ handoff_id: 'hb-c1' }) });
    expect(handback).toEqual({ ok: false, code: 'not_returnable' });
    given(handoffDecider, []).when(completeFromResult()).thenFails('not_found');
  });
});
