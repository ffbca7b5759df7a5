import { Inject, Injectable } from '@nestjs/common';
import type { MeshEvent } from '@baton/contracts';
import { meshDecider, type MeshState } from '@baton/domain';
import { PoisonError, TransientError, reactor, type HopTrace, type Reactor, type ReactorEvent } from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { LEDGER, type LedgerReply, type RouterLedger } from '../dispatch/ledger';
import { meshHandoffRequest, type MeshHandedOff } from './mesh-handoff-request';

type MeshEventOf<T extends MeshEvent['type']> = ReactorEvent<Extract<MeshEvent, { type: T }>>;

/** Delay before a ledger call that could not reach the ledger is retried. */
export const MESH_LEDGER_RETRY_DELAY_MS = 1000;

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
 * - `mesh.completed`, `mesh.stopped` (the notifier turns the stop packet into an inbox item),
 *   `mesh.handoff_ignored`, `mesh.turn_rejected`: logged only.
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
      'mesh.turn_rejected': (event, _state, ctx) =>
        this.logFor(event, ctx.trace).warn('mesh turn rejected', { agent: event.payload.agent, code: event.payload.code, reason: event.payload.message }),
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
    const reply = await this.call('create', () => this.ledger.create(envelope.project, body, { trace }));
    this.settle('create', reply, 'already_exists', log.child({ handoff_id: payload.handoff_id, to_agent: body.to_agent }));
  }

  private async closeTurn(envelope: MeshEventOf<'mesh.turn_recorded'>, trace: HopTrace): Promise<void> {
    const log = this.logFor(envelope, trace);
    const turn = envelope.payload;
    if (turn.handoff_id === null) return;
    const reply = await this.call('complete_from_result', () =>
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
    this.settle('complete_from_result', reply, 'handoff_not_open', log.child({ handoff_id: turn.handoff_id, result_id: turn.result_id }));
  }

  private async call(command: string, send: () => Promise<LedgerReply>): Promise<LedgerReply> {
    let reply: LedgerReply;
    try {
      reply = await send();
    } catch (error) {
      // No ledger answered: retried until one does (see DispatchReactor.call).
      throw new TransientError(`ledger ${command} failed: ${String(error)}`, { cause: error, unbounded: true });
    }
    if (!reply.ok && reply.error.kind === 'unavailable') {
      throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { unbounded: true });
    }
    if (!reply.ok && reply.error.kind === 'internal') {
      throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { delayMs: MESH_LEDGER_RETRY_DELAY_MS });
    }
    return reply;
  }

  private settle(command: string, reply: LedgerReply, doneCode: string, log: JsonLogger): void {
    if (reply.ok) {
      log.info(`ledger ${command} ${reply.events > 0 ? 'applied' : 'already applied'}`, { status: reply.handoff.status });
      return;
    }
    if (reply.error.code === doneCode) {
      log.info(`ledger ${command} already done`, { code: reply.error.code });
      return;
    }
    log.error(`ledger refused ${command}`, { code: reply.error.code, reason: reply.error.message });
    throw new PoisonError(`ledger refused ${command}: ${reply.error.code}: ${reply.error.message}`, 'ledger_refused');
  }
}
