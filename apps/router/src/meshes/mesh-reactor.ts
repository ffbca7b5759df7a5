import { Inject, Injectable } from '@nestjs/common';
import type { MeshEvent } from '@baton/contracts';
import { meshDecider, type MeshState } from '@baton/domain';
import { PoisonError, TransientError, reactor, type HopTrace, type Reactor, type ReactorEvent } from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { LEDGER, callLedger, settleLedgerReply, type RouterLedger } from '../dispatch/ledger';
import { sayResultRefused } from '../shared/result-refused';
import { meshHandoffRequest, type MeshHandedOff } from './mesh-handoff-request';

type MeshEventOf<T extends MeshEvent['type']> = ReactorEvent<Extract<MeshEvent, { type: T }>>;

/** Ledger codes that mean "already done": the reactor's effect happened before. */
const CREATE_DONE = new Set(['already_exists']);
const COMPLETE_DONE = new Set(['handoff_not_open']);

/**
 * The mesh reactor: a durable consumer of the mesh events (`<prefix>.ev.*.mesh.*`) that carries
 * each committed mesh decision to the ledger, exactly like the run dispatch reactor. Starting
 * from the stored event means a crash (or a restart of every service) between the append and the
 * ledger call only delays the call: the event is redelivered until the ledger answered.
 *
 * - `mesh.started` → ledger `create` for the entry agent; `mesh.handed_off` → `create` for the
 *   target (idempotency key = the event id; `already_exists` counts as done). The ledger then
 *   offers the handoff on `<prefix>.in.<project>.offer.<agent>`, where the agent's SDK takes it.
 * - `mesh.turn_recorded` → ledger `complete_from_result` for the handoff the turn answered
 *   (idempotency key = the result id; `handoff_not_open` counts as done; `not_found` is retried:
 *   the create may still be on its way).
 * - `mesh.turn_rejected` of an agent's turn → told to that agent on its own
 *   `<agent inbox>.refused` (`result-refused.json`, a hint: docs/meshes.md), and logged.
 * - `mesh.completed`, `mesh.stopped` (the notifier turns the stop packet into an inbox item),
 *   `mesh.handoff_ignored`: logged only.
 *
 * Ledger unreachable or failing → TransientError (nak with delay); any other refusal →
 * PoisonError (`ledger_refused`, dead letter).
 */
@Injectable()
export class MeshReactor {
  /** The reactor table: mesh events → ledger calls and logs, with the mesh as it stood after each event. */
  readonly table: Reactor<MeshEvent, MeshState> = reactor({
    name: 'mesh reactor',
    aggregate: 'mesh',
    decider: meshDecider,
    on: {
      'mesh.started': (event, state, ctx) => this.offerTurn(event, state.after, ctx.trace),
      'mesh.handed_off': (event, state, ctx) => this.offerTurn(event, state.after, ctx.trace),
      'mesh.turn_recorded': (event, _state, ctx) => this.closeTurn(event, ctx.trace),
      'mesh.completed': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).info('mesh completed', {
          agent: event.payload.agent,
          turns: event.payload.turns,
          output_agent: event.payload.output?.agent ?? null,
        }),
      // A stop that waits for a person is an outcome, as a run's is (logged at info there too).
      'mesh.stopped': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).info('mesh stopped', {
          why: event.payload.packet.why,
          packet_id: event.payload.packet.packet_id,
          turns: event.payload.turns,
        }),
      'mesh.handoff_ignored': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).warn('mesh handoff call ignored', { agent: event.payload.agent, tool: event.payload.tool, reason: event.payload.reason }),
      'mesh.turn_rejected': (event, _state, ctx) => {
        const log = this.logFor(event, ctx.trace);
        log.warn('mesh turn rejected', { agent: event.payload.agent, code: event.payload.code, reason: event.payload.message });
        sayResultRefused(this.runtime, { ...event, runId: event.aggregate.id, seq: ctx.seq }, log);
      },
      'mesh.notice_emitted': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).info('mesh notice emitted', {
          notice_id: event.payload.notice.notice_id,
          recipient: event.payload.notice.recipient.handle,
        }),
      'mesh.stop_answered': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).info('mesh stop answered', {
          packet_id: event.payload.packet_id,
          effect: event.payload.effect.kind,
          max_iterations: event.payload.max_iterations,
        }),
      'mesh.terminated': (event, _state, ctx) => this.logFor(event, ctx.trace).info('mesh terminated', { reason: event.payload.reason }),
    },
  });

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER) private readonly ledger: RouterLedger,
  ) {}

  private logFor(event: MeshEventOf<MeshEvent['type']>, trace: HopTrace): JsonLogger {
    return this.runtime.logger.child({
      trace_id: trace.traceId,
      project: event.project,
      mesh_run_id: event.aggregate.id,
      event_id: event.id,
      type: event.type,
    });
  }

  private async offerTurn(envelope: MeshEventOf<'mesh.started' | 'mesh.handed_off'>, state: MeshState, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    if (state.status === 'none') throw new PoisonError(`mesh ${envelope.aggregate.id} has no mesh.started before seq ${envelope.seq}`, 'not_found');
    const payload = envelope.payload;
    const handedOff = envelope.type === 'mesh.handed_off' ? (payload as MeshHandedOff) : null;
    const body = meshHandoffRequest({
      project: envelope.project,
      eventId: envelope.id,
      state,
      handoffId: payload.handoff_id,
      to: handedOff?.to ?? state.mesh.entry,
      from: handedOff?.from ?? null,
      turn: handedOff?.turn ?? 1,
      tool: handedOff?.tool ?? null,
      ...(handedOff?.handover !== undefined ? { handover: handedOff.handover } : {}),
      ...(handedOff?.resume !== undefined ? { resume: handedOff.resume } : {}),
    });
    const reply = await callLedger('create', () => this.ledger.create(envelope.project, body, { trace }));
    settleLedgerReply('create', reply, CREATE_DONE, log.child({ handoff_id: payload.handoff_id, to_agent: body.to_agent }));
  }

  private async closeTurn(envelope: MeshEventOf<'mesh.turn_recorded'>, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    const turn = envelope.payload;
    if (turn.handoff_id === null) return;
    const reply = await callLedger('complete_from_result', () =>
      this.ledger.completeFromResult(
        envelope.project,
        {
          handoff_id: turn.handoff_id!,
          result_id: turn.result_id,
          agent: turn.agent,
          workflow_run_id: envelope.aggregate.id,
          ...(turn.claim_id !== undefined ? { claim_id: turn.claim_id } : {}),
          summary: `${turn.agent} took mesh turn ${turn.turn}${turn.handoff_tool_calls.length > 0 ? ` (${turn.handoff_tool_calls.length} handoff call(s))` : ''}`,
          // The turn's evidence decides the ledger's evidence floor, as a workflow result's does.
          evidence: turn.evidence ?? {},
          idempotency_key: turn.result_id,
        },
        { trace },
      ),
    );
    if (!reply.ok && reply.error.code === 'not_found') {
      // Waits for its creation as long as it takes (see DispatchReactor: a turn follows a claim).
      throw new TransientError(`handoff ${turn.handoff_id} does not exist yet`, { unbounded: true });
    }
    settleLedgerReply('complete_from_result', reply, COMPLETE_DONE, log.child({ handoff_id: turn.handoff_id, result_id: turn.result_id }));
  }
}
