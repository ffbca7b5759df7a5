import { handoffToolName, MeshDefinitionSchema, type AgentResult, type HandoffEvent, type MeshEvent } from '@baton/contracts';
import { fold } from '../decider';
import type { HandoffCommand } from '../handoff/commands';
import { handoffDecider } from '../handoff/decider';
import { initialHandoffState, type HandoffState } from '../handoff/state';
import type { MeshCommand } from '../mesh/commands';
import { meshDecider, meshEntryHandoffId } from '../mesh/decide';
import type { RecordResult } from '../run/commands';
import { runDecider } from '../run/decide';
import type { RunEvent } from '../run/state';
import { agents, meta, NOW, RUN, result, startCmd, workflow } from '../run/test-helpers';
import { given } from '../testing/given';
import { checkResultClaim, handoffClaimView, ResultClaimCode, type HandoffClaimView } from './result-claim';

/*
 * Issue 11: a result is accepted only for the run's current handoff and its current claim. The
 * router reads the handoff the result names (the ledger's aggregate) into a HandoffClaimView and
 * the deciders apply the rule; these tests drive the rule through the run and mesh deciders.
 */

/** A started run: the entry agent `issue` is dispatched on handoff `ho-s-wr-1`. */
const started = (): RunEvent[] => {
  const decided = runDecider.decide(startCmd(), runDecider.initialState());
  if (!decided.ok) throw new Error(decided.error.code);
  return decided.events;
};
const ENTRY_HANDOFF = `ho-s-${RUN}`;
const CLAIM = 'claim-1';

const claimedBy = (agent: string, claim_id = CLAIM, handoff_id = ENTRY_HANDOFF): HandoffClaimView => ({
  handoff_id,
  status: 'claimed',
  claim: { claim_id, claimed_by: agent },
});
const pendingView = (handoff_id = ENTRY_HANDOFF): HandoffClaimView => ({ handoff_id, status: 'pending', claim: null });

function resultFor(extra: Partial<AgentResult>, handoff: HandoffClaimView | null | undefined, agent = 'issue'): RecordResult {
  return {
    type: 'record_result',
    data: { result: result('r1', agent, extra), workflow, agents, ...(handoff !== undefined ? { handoff } : {}) },
    metadata: meta,
  };
}

/** The attack of issue 11: a `policy` stop with a forged pending refund, sent without a claim. */
const forged: Partial<AgentResult> = {
  stop: { why: 'policy', detail: 'refund needs approval' },
  pending_tool_call: { name: 'refund', args: { order: 'o-1', amount_usd: 5000, to_account: 'attacker' } },
};

describe("claim rule (issue 11): a result is accepted only under the current claim of the run's current handoff", () => {
  it('given a run on a handoff, when a result names no handoff and no claim, then it is refused (claim_required)', () => {
    given(runDecider, started()).when(resultFor({}, null)).thenFails('claim_required');
  });

  it('given a run on a handoff, when an unclaimed result carries a policy stop and a pending refund, then it is refused: no stop, no packet, no notice', () => {
    const when = given(runDecider, started()).when(resultFor(forged, pendingView()));
    when.thenFails('claim_required');
    expect(when.result.ok).toBe(false);
    const namingTheHandoff = given(runDecider, started()).when(resultFor({ ...forged, handoff_id: ENTRY_HANDOFF, claim_id: 'claim-forged' }, pendingView()));
    namingTheHandoff.thenFails('handoff_not_claimed');
  });

  it('given a run on a handoff, when the result names the handoff but no claim_id, then claim_required', () => {
    given(runDecider, started())
      .when(resultFor({ handoff_id: ENTRY_HANDOFF }, claimedBy('issue')))
      .thenFails('claim_required');
  });

  it('given a run on a handoff, when the result names another handoff, then stale_handoff', () => {
    given(runDecider, started())
      .when(resultFor({ handoff_id: 'ho-old', claim_id: CLAIM }, claimedBy('issue', CLAIM, 'ho-old')))
      .thenFails('stale_handoff');
  });

  it.each([
    ['not created yet (absent)', { handoff_id: ENTRY_HANDOFF, status: 'absent', claim: null } as HandoffClaimView],
    ['pending (never claimed, or requeued after its lease expired)', pendingView()],
    ['completed', { handoff_id: ENTRY_HANDOFF, status: 'completed', claim: { claim_id: CLAIM, claimed_by: 'issue' } } as HandoffClaimView],
    ['released', { handoff_id: ENTRY_HANDOFF, status: 'released', claim: { claim_id: CLAIM, claimed_by: 'issue' } } as HandoffClaimView],
    ['unread (the router read nothing)', null],
    ['a view of another handoff', claimedBy('issue', CLAIM, 'ho-other')],
  ])('given the handoff is %s, when a result names it and a claim, then handoff_not_claimed', (_what, view) => {
    given(runDecider, started())
      .when(resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM }, view))
      .thenFails('handoff_not_claimed');
  });

  it('given the handoff is claimed under another claim id, when a result names an older claim, then claim_mismatch', () => {
    given(runDecider, started())
      .when(resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: 'claim-old' }, claimedBy('issue', 'claim-new')))
      .thenFails('claim_mismatch');
  });

  it('given the handoff is claimed by another agent, when a result names that claim, then claim_mismatch', () => {
    given(runDecider, started())
      .when(resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM }, claimedBy('architect')))
      .thenFails('claim_mismatch');
  });

  it('given the handoff is claimed by this agent with this claim, when the result arrives, then it is recorded and routed (a policy stop opens its packet)', () => {
    given(runDecider, started())
      .when(resultFor({ ...forged, handoff_id: ENTRY_HANDOFF, claim_id: CLAIM }, claimedBy('issue')))
      .thenMatch([
        { type: 'run.result_recorded' },
        { type: 'run.stopped', data: expect.objectContaining({ packet: expect.objectContaining({ why: 'policy' }) }) },
        { type: 'run.notice_emitted' },
      ]);
  });

  describe('rule 4b: a result stored before its lease ran out, read after the watchdog requeued the claim', () => {
    const EXPIRY = '2026-01-01T00:10:00.000Z';
    const lapsed = (status: 'pending' | 'claimed' = 'pending', claim: HandoffClaimView['claim'] = null): HandoffClaimView => ({
      handoff_id: ENTRY_HANDOFF,
      status,
      claim,
      lapsed: { claim_id: CLAIM, claimed_by: 'issue', lease_expires_at: EXPIRY },
    });
    const late = (storedAt: string | undefined, view: HandoffClaimView, extra: Partial<AgentResult> = {}, agent = 'issue'): RecordResult => {
      const command = resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, body: 'done', ...extra }, view, agent);
      return storedAt !== undefined ? { ...command, data: { ...command.data, stored_at: storedAt } } : command;
    };

    it('given the claim lapsed, when its result was stored at or before the expiry, then it is recorded under that claim (pending again, or claimed since by a new claim)', () => {
      for (const storedAt of ['2026-01-01T00:09:59.999Z', EXPIRY]) {
        const recorded = given(runDecider, started()).when(late(storedAt, lapsed()));
        recorded.thenMatch([
          { type: 'run.result_recorded', data: expect.objectContaining({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM }) },
          { type: 'run.held' },
          { type: 'run.notice_emitted' },
        ]);
      }
      given(runDecider, started())
        .when(late('2026-01-01T00:09:00.000Z', lapsed('claimed', { claim_id: 'claim-2', claimed_by: 'issue' })))
        .thenMatch([{ type: 'run.result_recorded', data: expect.objectContaining({ claim_id: CLAIM }) }, { type: 'run.held' }, { type: 'run.notice_emitted' }]);
    });

    it('given the claim lapsed, when its result was stored after the expiry, or its store time is unknown, then it is refused, and the message says when each happened', () => {
      const after = given(runDecider, started()).when(late('2026-01-01T00:10:00.001Z', lapsed()));
      after.thenFails('handoff_not_claimed');
      expect(after.result.ok ? '' : after.result.error.message).toContain(
        `its claim ${CLAIM} lapsed at ${EXPIRY} and it was stored at 2026-01-01T00:10:00.001Z`,
      );
      const unknown = given(runDecider, started()).when(late(undefined, lapsed()));
      unknown.thenFails('handoff_not_claimed');
      expect(unknown.result.ok ? '' : unknown.result.error.message).toContain('its store time is unknown');
      const reclaimed = given(runDecider, started()).when(late('2026-01-01T00:10:01.000Z', lapsed('claimed', { claim_id: 'claim-2', claimed_by: 'issue' })));
      reclaimed.thenFails('claim_mismatch');
      expect(reclaimed.result.ok ? '' : reclaimed.result.error.message).toContain(`lapsed at ${EXPIRY}`);
    });

    it('only the lapsed claim, from its holder: another claim id or another agent stored in time is refused', () => {
      given(runDecider, started())
        .when(late('2026-01-01T00:09:00.000Z', lapsed(), { claim_id: 'claim-forged' }))
        .thenFails('handoff_not_claimed');
      expect(
        checkResultClaim(
          ENTRY_HANDOFF,
          { result_id: 'r', agent: 'intruder', handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, stored_at: '2026-01-01T00:09:00.000Z' },
          lapsed(),
        ),
      ).toMatchObject({ code: 'handoff_not_claimed' });
      expect(
        checkResultClaim(ENTRY_HANDOFF, { result_id: 'r', agent: 'issue', handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, stored_at: 'not a time' }, lapsed()),
      ).toMatchObject({ code: 'handoff_not_claimed' });
    });

    it('a handoff view keeps the lapsed claim only while the handoff is open (pending or claimed), and only with its expiry', () => {
      const lapsedClaim = { claim_id: 'c-1', claimed_by: 'coder', retry_count: 0, lease_expires_at: EXPIRY };
      const pending = { status: 'pending', id: 'h-1', lapsed_claim: lapsedClaim } as unknown as HandoffState;
      expect(handoffClaimView('h-1', pending)).toEqual({
        handoff_id: 'h-1',
        status: 'pending',
        claim: null,
        lapsed: { claim_id: 'c-1', claimed_by: 'coder', lease_expires_at: EXPIRY },
      });
      const completed = {
        status: 'completed',
        id: 'h-1',
        claim: { claim_id: 'c-2', claimed_by: 'coder' },
        lapsed_claim: lapsedClaim,
      } as unknown as HandoffState;
      expect(handoffClaimView('h-1', completed)).not.toHaveProperty('lapsed');
      const older = { status: 'pending', id: 'h-1', lapsed_claim: { claim_id: 'c-1', claimed_by: 'coder', retry_count: 0 } } as unknown as HandoffState;
      expect(handoffClaimView('h-1', older)).not.toHaveProperty('lapsed');
    });

    describe('before the requeue: the claim is still current, but its lease ran out (audit: the watchdog tick used to decide)', () => {
      /** The entry handoff as the ledger stores it: created, claimed by `issue` with a 1.5 s lease at `claimedAt`. */
      const claimedAt = '2026-01-01T00:09:58.500Z';
      const ledgerEvents = (): HandoffEvent[] => {
        const events: HandoffEvent[] = [];
        const run = (command: HandoffCommand) => {
          const decided = handoffDecider.decide(command, fold(handoffDecider, events));
          if (!decided.ok) throw new Error(decided.error.code);
          events.push(...decided.events);
        };
        run({
          type: 'create',
          data: {
            handoff_id: ENTRY_HANDOFF,
            project: 'demo',
            kind: 'task',
            priority: 'medium',
            from_agent: 'baton-router',
            to_agent: 'issue',
            summary: 'triage',
            context: {},
            acceptance: {},
            max_retries: 3,
            idempotency_key: 'create-1',
          },
          metadata: { now: '2026-01-01T00:09:58.000Z', actor: 'baton-router', actorKind: 'system' },
        });
        run({
          type: 'claim',
          data: { handoff_id: ENTRY_HANDOFF, idempotency_key: 'claim-key-1', claim_id: CLAIM, lease_ms: 1_500, claimer_roles: [] },
          metadata: { now: claimedAt, actor: 'issue', actorKind: 'agent' },
        });
        return events;
      };
      const claimedView = () => handoffClaimView(ENTRY_HANDOFF, fold(handoffDecider, ledgerEvents()));
      /** The same handoff once the watchdog's requeue landed (up to its tick after the expiry). */
      const requeuedView = () => {
        const events = ledgerEvents();
        const requeued = handoffDecider.decide(
          {
            type: 'requeue_expired',
            data: { handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, idempotency_key: 'requeue-1', escalation_handoff_id: `esc-${ENTRY_HANDOFF}` },
            metadata: { now: '2026-01-01T00:10:00.400Z', actor: 'baton-watchdog', actorKind: 'system' },
          },
          fold(handoffDecider, events),
        );
        if (!requeued.ok) throw new Error(requeued.error.code);
        return handoffClaimView(ENTRY_HANDOFF, fold(handoffDecider, [...events, ...requeued.events]));
      };

      it('the view of a claimed handoff carries its lease expiry, as the ledger set it', () => {
        expect(claimedView()).toEqual({
          handoff_id: ENTRY_HANDOFF,
          status: 'claimed',
          claim: { claim_id: CLAIM, claimed_by: 'issue', lease_expires_at: EXPIRY },
        });
      });

      it('given the lease ran out and no requeue landed yet, when the result was stored after the expiry, then it is refused handoff_not_claimed, saying when each happened', () => {
        const refused = given(runDecider, started()).when(late('2026-01-01T00:10:00.215Z', claimedView()));
        refused.thenFails('handoff_not_claimed');
        expect(refused.result.ok ? '' : refused.result.error.message).toBe(
          `handoff ${ENTRY_HANDOFF} is claimed, but its lease ran out: result r1 holds no current claim; its claim ${CLAIM} lapsed at ${EXPIRY} and it was stored at 2026-01-01T00:10:00.215Z`,
        );
      });

      it('the store time decides, not the requeue: the same result is decided alike before and after the requeue landed', () => {
        for (const view of [claimedView(), requeuedView()]) {
          given(runDecider, started()).when(late('2026-01-01T00:10:00.001Z', view)).thenFails('handoff_not_claimed');
          for (const storedAt of ['2026-01-01T00:09:59.000Z', EXPIRY]) {
            given(runDecider, started())
              .when(late(storedAt, view))
              .thenMatch([
                { type: 'run.result_recorded', data: expect.objectContaining({ claim_id: CLAIM }) },
                { type: 'run.held' },
                { type: 'run.notice_emitted' },
              ]);
          }
        }
      });

      it('a heartbeat after the expiry cannot revive the lapsed lease: refused lease_expired, the expiry unchanged, so the late result is still refused', () => {
        const events = ledgerEvents();
        const beat = handoffDecider.decide(
          {
            type: 'heartbeat',
            data: { handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, idempotency_key: 'beat-1' },
            metadata: { now: '2026-01-01T00:10:00.100Z', actor: 'issue', actorKind: 'agent' },
          },
          fold(handoffDecider, events),
        );
        expect(beat).toMatchObject({ ok: false, error: { code: 'lease_expired' } });
        given(runDecider, started()).when(late('2026-01-01T00:10:00.215Z', claimedView())).thenFails('handoff_not_claimed');
      });

      it('a result with no store time is judged on the claim alone (accepted under the current claim); a view without the lease expiry checks none', () => {
        given(runDecider, started())
          .when(late(undefined, claimedView()))
          .thenMatch([{ type: 'run.result_recorded' }, { type: 'run.held' }, { type: 'run.notice_emitted' }]);
        given(runDecider, started())
          .when(late('2026-01-01T00:11:00.000Z', claimedBy('issue')))
          .thenMatch([{ type: 'run.result_recorded' }, { type: 'run.held' }, { type: 'run.notice_emitted' }]);
      });

      it("in a mesh, the speaker's turn stored after its lease ran out is refused (mesh.turn_rejected handoff_not_claimed) before the requeue as after it", () => {
        const mesh = MeshDefinitionSchema.parse({
          name: 'support',
          entry: 'triage',
          handoffs: { triage: ['billing'], billing: ['triage'] },
          outputs: ['triage'],
        });
        const start = meshDecider.decide(
          {
            type: 'start_mesh',
            data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'], started_by: 'sam' },
            metadata: { now: NOW, actor: 'sam' },
          },
          meshDecider.initialState(),
        );
        if (!start.ok) throw new Error(start.error.code);
        const entry = meshEntryHandoffId('m1');
        const claimed: HandoffClaimView = { handoff_id: entry, status: 'claimed', claim: { claim_id: CLAIM, claimed_by: 'triage', lease_expires_at: EXPIRY } };
        const requeued: HandoffClaimView = {
          handoff_id: entry,
          status: 'pending',
          claim: null,
          lapsed: { claim_id: CLAIM, claimed_by: 'triage', lease_expires_at: EXPIRY },
        };
        const turn = (stored_at: string, handoff: HandoffClaimView): MeshCommand => ({
          type: 'record_turn',
          data: {
            result_id: 't1',
            run_id: 'ar-t1',
            agent: 'triage',
            text: 'over',
            handoff_tool_calls: [{ tool: handoffToolName('billing') }],
            handoff_id: entry,
            claim_id: CLAIM,
            handoff,
            stored_at,
          },
          metadata: { now: NOW, actor: 'triage' },
        });
        for (const view of [claimed, requeued]) {
          given(meshDecider, start.events)
            .when(turn('2026-01-01T00:10:00.215Z', view))
            .thenMatch([
              {
                type: 'mesh.turn_rejected',
                data: expect.objectContaining({
                  code: 'handoff_not_claimed',
                  message: expect.stringContaining(`its claim ${CLAIM} lapsed at ${EXPIRY} and it was stored at 2026-01-01T00:10:00.215Z`),
                }),
              },
            ]);
          given(meshDecider, start.events)
            .when(turn('2026-01-01T00:09:59.000Z', view))
            .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off' }]);
        }
      });
    });

    it("in a mesh, the speaker's turn stored before its lease ran out is recorded under the lapsed claim", () => {
      const mesh = MeshDefinitionSchema.parse({
        name: 'support',
        entry: 'triage',
        handoffs: { triage: ['billing'], billing: ['triage'] },
        outputs: ['triage'],
      });
      const start = meshDecider.decide(
        {
          type: 'start_mesh',
          data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'], started_by: 'sam' },
          metadata: { now: NOW, actor: 'sam' },
        },
        meshDecider.initialState(),
      );
      if (!start.ok) throw new Error(start.error.code);
      const entry = meshEntryHandoffId('m1');
      const view: HandoffClaimView = {
        handoff_id: entry,
        status: 'pending',
        claim: null,
        lapsed: { claim_id: CLAIM, claimed_by: 'triage', lease_expires_at: EXPIRY },
      };
      const turn = (stored_at: string): MeshCommand => ({
        type: 'record_turn',
        data: {
          result_id: 't1',
          run_id: 'ar-t1',
          agent: 'triage',
          text: 'over',
          handoff_tool_calls: [{ tool: handoffToolName('billing') }],
          handoff_id: entry,
          claim_id: CLAIM,
          handoff: view,
          stored_at,
        },
        metadata: { now: NOW, actor: 'triage' },
      });
      given(meshDecider, start.events)
        .when(turn('2026-01-01T00:09:00.000Z'))
        .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off' }]);
      given(meshDecider, start.events)
        .when(turn('2026-01-01T00:11:00.000Z'))
        .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'handoff_not_claimed' }) }]);
    });
  });

  it('given a result already recorded, when it is redelivered after the handoff closed, then nothing happens (no refusal)', () => {
    const first = given(runDecider, started()).when(
      resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, decision: { dispatch: { status: 'advance' } } }, claimedBy('issue')),
    );
    const recorded = first.thenMatch([{ type: 'run.result_recorded' }, { type: 'run.routed' }]);
    const history = [...started(), ...recorded];
    given(runDecider, history)
      .when(
        resultFor(
          { handoff_id: ENTRY_HANDOFF, claim_id: CLAIM },
          { handoff_id: ENTRY_HANDOFF, status: 'completed', claim: { claim_id: CLAIM, claimed_by: 'issue' } },
        ),
      )
      .then([]);
  });

  describe('a result whose append was cut short (recorded, not routed), decided again to complete it (the event store resuming it)', () => {
    const claimed = resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, decision: { dispatch: { status: 'advance' } } }, claimedBy('issue'));
    const first = (): RunEvent[] => {
      const decided = runDecider.decide(claimed, fold(runDecider, started()));
      if (!decided.ok) throw new Error(decided.error.code);
      return decided.events;
    };
    // How the handoff may look by the retry: the ledger completed it from the stored record; or its
    // claim lapsed and was taken again (by the same agent or another), or it waits pending again.
    const movedOn: Array<[string, HandoffClaimView]> = [
      ['completed by this result', { ...claimedBy('issue'), status: 'completed' }],
      ['claimed anew by the same agent', claimedBy('issue', 'claim-2')],
      ['claimed by another agent', claimedBy('architect', 'claim-3')],
      ['pending again', { ...pendingView(), lapsed: { claim_id: 'claim-2', claimed_by: 'issue', lease_expires_at: NOW } }],
    ];

    it.each(movedOn)('the handoff %s: without resuming the claim rule refuses it; resumed on its stored record, the same events come out', (_what, view) => {
      const retry = resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM, decision: { dispatch: { status: 'advance' } } }, view);
      const before = fold(runDecider, started());
      expect(runDecider.decide(retry, before).ok).toBe(false);
      const [recorded] = first();
      const resumed = runDecider.resuming?.(retry, [recorded as RunEvent]);
      expect(resumed?.type === 'record_result' && resumed.data.claim_recorded).toBe(true);
      expect(runDecider.decide(resumed as RecordResult, before)).toEqual({ ok: true, events: first() });
    });

    it('a record of another result, another agent or another claim proves nothing: the command is decided as it came, and refused', () => {
      const [recorded] = first() as [Extract<RunEvent, { type: 'run.result_recorded' }>];
      const retry = resultFor({ handoff_id: ENTRY_HANDOFF, claim_id: CLAIM }, claimedBy('issue', 'claim-2'));
      for (const other of [
        { ...recorded, data: { ...recorded.data, result_id: 'r-other' } },
        { ...recorded, data: { ...recorded.data, agent: 'architect' } },
        { ...recorded, data: { ...recorded.data, claim_id: 'claim-0' } },
      ]) {
        expect(runDecider.resuming?.(retry, [other])).toBe(retry);
      }
      expect(runDecider.resuming?.(retry, [])).toBe(retry);
      given(runDecider, started()).when(retry).thenFails('claim_mismatch');
    });
  });

  it("the refusal is recorded on the run as run.result_rejected with its code (the router's refusal path), never as a stop", () => {
    const refused = given(runDecider, started()).when(resultFor(forged, null)).thenFails('claim_required');
    given(runDecider, started())
      .when({ type: 'reject_result', data: { result_id: 'r1', agent: 'issue', code: refused.code, message: refused.message }, metadata: meta })
      .thenMatch([{ type: 'run.result_rejected', data: expect.objectContaining({ result_id: 'r1', code: 'claim_required' }) }]);
  });

  describe('a run with no handoff dispatched yet', () => {
    // Only run.started: nothing routed, so the run is on no handoff (state.handoffId null).
    const bare = (): RunEvent[] => started().filter((e) => e.type === 'run.started');

    it('given no handoff, when the entry agent sends a result without handoff or claim, then it is recorded (the subject pins the agent)', () => {
      expect(fold(runDecider, bare())).toMatchObject({ status: 'running', agent: 'issue', handoffId: null });
      given(runDecider, bare())
        .when(resultFor({ decision: { dispatch: { status: 'advance' } } }, undefined))
        .thenMatch([{ type: 'run.result_recorded' }, { type: 'run.routed' }]);
    });

    it('given no handoff, when a result names a handoff or a claim, then stale_handoff; another agent is still unexpected_agent', () => {
      given(runDecider, bare())
        .when(resultFor({ handoff_id: ENTRY_HANDOFF }, undefined))
        .thenFails('stale_handoff');
      given(runDecider, bare())
        .when(resultFor({ claim_id: CLAIM }, undefined))
        .thenFails('stale_handoff');
      given(runDecider, bare())
        .when(resultFor({}, undefined, 'architect'))
        .thenFails('unexpected_agent');
    });
  });
});

describe('claim rule (issue 11) in a handoff mesh: every turn is offered as a handoff', () => {
  const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, outputs: ['triage'] });
  const meshStarted = (): MeshEvent[] => {
    const decided = meshDecider.decide(
      {
        type: 'start_mesh',
        data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'], started_by: 'sam' },
        metadata: { now: NOW, actor: 'sam' },
      },
      meshDecider.initialState(),
    );
    if (!decided.ok) throw new Error(decided.error.code);
    return decided.events;
  };
  const entry = meshEntryHandoffId('m1');
  const turn = (extra: { handoff_id?: string; claim_id?: string; handoff?: HandoffClaimView | null }, agent = 'triage'): MeshCommand => ({
    type: 'record_turn',
    data: { result_id: 't1', run_id: 'ar-t1', agent, text: 'over to billing', handoff_tool_calls: [{ tool: handoffToolName('billing') }], ...extra },
    metadata: { now: NOW, actor: agent },
  });
  const rejected = (code: string) => [{ type: 'mesh.turn_rejected' as const, data: expect.objectContaining({ result_id: 't1', code }) }];

  it('given a mesh on its entry handoff, when a turn names no claim, then it is recorded as mesh.turn_rejected (claim_required) and routes nothing', () => {
    given(meshDecider, meshStarted()).when(turn({})).thenMatch(rejected('claim_required'));
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: entry }))
      .thenMatch(rejected('claim_required'));
  });

  it('given the entry handoff pending, claimed by another agent or under another claim, then handoff_not_claimed / claim_mismatch', () => {
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: entry, claim_id: CLAIM, handoff: pendingView(entry) }))
      .thenMatch(rejected('handoff_not_claimed'));
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: entry, claim_id: CLAIM, handoff: claimedBy('billing', CLAIM, entry) }))
      .thenMatch(rejected('claim_mismatch'));
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: entry, claim_id: 'claim-old', handoff: claimedBy('triage', CLAIM, entry) }))
      .thenMatch(rejected('claim_mismatch'));
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: 'ho-old', claim_id: CLAIM, handoff: claimedBy('triage', CLAIM, 'ho-old') }))
      .thenMatch(rejected('stale_handoff'));
  });

  it('given the speaker holds the current claim, when it sends its turn, then the turn is recorded and hands off', () => {
    given(meshDecider, meshStarted())
      .when(turn({ handoff_id: entry, claim_id: CLAIM, handoff: claimedBy('triage', CLAIM, entry) }))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off', data: expect.objectContaining({ to: 'billing' }) }]);
  });

  it('given a turn cut short after its record (mesh.turn_recorded stored, mesh.handed_off not), when it is completed after its claim moved on, then the same events come out', () => {
    const first = meshDecider.decide(
      turn({ handoff_id: entry, claim_id: CLAIM, handoff: claimedBy('triage', CLAIM, entry) }),
      fold(meshDecider, meshStarted()),
    );
    if (!first.ok) throw new Error(first.error.code);
    // By the retry the ledger completed the entry handoff from the stored turn.
    const retry = turn({ handoff_id: entry, claim_id: CLAIM, handoff: { ...claimedBy('triage', CLAIM, entry), status: 'completed' } });
    given(meshDecider, meshStarted()).when(retry).thenMatch(rejected('handoff_not_claimed'));
    const resumed = meshDecider.resuming?.(retry, first.events.slice(0, 1)) as MeshCommand;
    expect(resumed.type === 'record_turn' && resumed.data.claim_recorded).toBe(true);
    expect(meshDecider.decide(resumed, fold(meshDecider, meshStarted()))).toEqual(first);
    // A record under another claim proves nothing.
    expect(meshDecider.resuming?.(turn({ handoff_id: entry, claim_id: 'claim-9' }), first.events.slice(0, 1))).toEqual(
      turn({ handoff_id: entry, claim_id: 'claim-9' }),
    );
  });

  it('a refused turn and a notice are passive (a cut-short turn completes behind them); every event that moves the mesh is not', () => {
    expect(['mesh.turn_rejected', 'mesh.notice_emitted'].map((type) => meshDecider.passive?.(type))).toEqual([true, true]);
    for (const type of [
      'mesh.started',
      'mesh.turn_recorded',
      'mesh.handoff_ignored',
      'mesh.handed_off',
      'mesh.completed',
      'mesh.stopped',
      'mesh.stop_answered',
      'mesh.terminated',
    ]) {
      expect({ type, passive: meshDecider.passive?.(type) }).toEqual({ type, passive: false });
    }
  });
});

describe('checkResultClaim and handoffClaimView', () => {
  it('a folded handoff becomes its view: absent, pending without a claim, claimed with its claim', () => {
    expect(handoffClaimView('h-1', initialHandoffState())).toEqual({ handoff_id: 'h-1', status: 'absent', claim: null });
    const claimed = {
      status: 'claimed',
      id: 'h-1',
      claim: { claim_id: 'c-1', claimed_by: 'coder', claimed_at: NOW, lease_expires_at: NOW },
    } as unknown as HandoffState;
    expect(handoffClaimView('h-1', claimed)).toEqual({
      handoff_id: 'h-1',
      status: 'claimed',
      claim: { claim_id: 'c-1', claimed_by: 'coder', lease_expires_at: NOW },
    });
    const pending = { status: 'pending', id: 'h-1' } as unknown as HandoffState;
    expect(handoffClaimView('h-1', pending)).toEqual({ handoff_id: 'h-1', status: 'pending', claim: null });
    const completed = { status: 'completed', id: 'h-1', claim: { claim_id: 'c-1', claimed_by: 'coder' }, result_id: 'r-9' } as unknown as HandoffState;
    expect(handoffClaimView('h-1', completed)).toEqual({ handoff_id: 'h-1', status: 'completed', claim: { claim_id: 'c-1', claimed_by: 'coder' } });
  });

  it('codes are stable', () => {
    expect(Object.values(ResultClaimCode).sort()).toEqual(['claim_mismatch', 'claim_required', 'handoff_not_claimed', 'stale_handoff']);
    expect(checkResultClaim('h-1', { result_id: 'r', agent: 'a', handoff_id: 'h-1', claim_id: 'c' }, claimedBy('a', 'c', 'h-1'))).toBeNull();
    expect(checkResultClaim(null, { result_id: 'r', agent: 'a' }, null)).toBeNull();
  });
});
