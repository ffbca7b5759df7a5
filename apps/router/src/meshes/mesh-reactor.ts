import { Inject, Injectable } from '@nestjs/common';
import type { EventEnvelope, MeshEvent } from '@baton/contracts';
import { evolveMesh, initialMeshState, type MeshRunState, type MeshState } from '@baton/domain';
import { PoisonError, TransientError } from '@baton/eventstore';
import { RUNTIME, type JsonLogger, type ServiceRuntime } from '@baton/platform';
import { LEDGER, type LedgerReply, type RouterLedger } from '../dispatch/ledger';
import { meshRef } from './mesh-commands';
import { meshHandoffRequest, type MeshHandedOff, type MeshStarted, type MeshTurnRecorded } from './mesh-handoff-request';

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
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(LEDGER) private readonly ledger: RouterLedger,
  ) {}

  /** Handle one stored mesh event (`seq` = its stream sequence). */
  async handle(raw: unknown, seq: number): Promise<void> {
    const decoded = this.runtime.registry.decode(raw);
    if (!decoded.ok) throw new PoisonError(`mesh event cannot be decoded: ${decoded.rejection.message}`, decoded.rejection.code);
    const envelope = decoded.value;
    const log = this.runtime.logger.child({ project: envelope.project, mesh_run_id: envelope.aggregate.id, event_id: envelope.id, type: envelope.type });
    const event = { type: envelope.type, data: envelope.payload } as MeshEvent;
    switch (event.type) {
      case 'mesh.started':
        return this.offerTurn(envelope as EventEnvelope<MeshStarted>, seq, log);
      case 'mesh.handed_off':
        return this.offerTurn(envelope as EventEnvelope<MeshHandedOff>, seq, log);
      case 'mesh.turn_recorded':
        return this.closeTurn(envelope as EventEnvelope<MeshTurnRecorded>, log);
      case 'mesh.completed':
        log.info('mesh completed', { agent: event.data.agent, turns: event.data.turns, output_agent: event.data.output?.agent ?? null });
        return;
      case 'mesh.stopped':
        log.warn('mesh stopped', { why: event.data.packet.why, packet_id: event.data.packet.packet_id, turns: event.data.turns });
        return;
      case 'mesh.handoff_ignored':
        log.warn('mesh handoff call ignored', { agent: event.data.agent, tool: event.data.tool, reason: event.data.reason });
        return;
      case 'mesh.turn_rejected':
        log.warn('mesh turn rejected', { agent: event.data.agent, code: event.data.code, reason: event.data.message });
        return;
      case 'mesh.notice_emitted':
        log.info('mesh notice emitted', { notice_id: event.data.notice.notice_id, recipient: event.data.notice.recipient.handle });
        return;
      case 'mesh.stop_answered':
        log.info('mesh stop answered', { packet_id: event.data.packet_id, effect: event.data.effect.kind, max_iterations: event.data.max_iterations });
        return;
      case 'mesh.terminated':
        log.info('mesh terminated', { reason: event.data.reason });
        return;
      default:
        return;
    }
  }

  private async offerTurn(envelope: EventEnvelope<MeshStarted | MeshHandedOff>, seq: number, log: JsonLogger): Promise<void> {
    const state = await this.stateThrough(envelope, seq);
    if (state.status === 'none') throw new PoisonError(`mesh ${envelope.aggregate.id} has no mesh.started before seq ${seq}`, 'not_found');
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
    });
    const reply = await this.call('create', () => this.ledger.create(envelope.project, body));
    this.settle('create', reply, 'already_exists', log.child({ handoff_id: payload.handoff_id, to_agent: body.to_agent }));
  }

  private async closeTurn(envelope: EventEnvelope<MeshTurnRecorded>, log: JsonLogger): Promise<void> {
    const turn = envelope.payload;
    if (turn.handoff_id === null) return;
    const reply = await this.call('complete_from_result', () =>
      this.ledger.completeFromResult(envelope.project, {
        handoff_id: turn.handoff_id!,
        result_id: turn.result_id,
        agent: turn.agent,
        workflow_run_id: envelope.aggregate.id,
        summary: `${turn.agent} took mesh turn ${turn.turn}${turn.handoff_tool_calls.length > 0 ? ` (${turn.handoff_tool_calls.length} handoff call(s))` : ''}`,
        evidence: {},
        idempotency_key: turn.result_id,
      }),
    );
    if (!reply.ok && reply.error.code === 'not_found') {
      throw new TransientError(`handoff ${turn.handoff_id} does not exist yet`, { delayMs: MESH_LEDGER_RETRY_DELAY_MS });
    }
    this.settle('complete_from_result', reply, 'handoff_not_open', log.child({ handoff_id: turn.handoff_id, result_id: turn.result_id }));
  }

  /** The mesh as it stood right after the event at `seq` (its own stream, folded). */
  private async stateThrough(envelope: EventEnvelope, seq: number): Promise<MeshState | MeshRunState> {
    const { events } = await this.runtime.store.read(meshRef(envelope.project, envelope.aggregate.id));
    return events
      .filter((event) => event.seq <= seq)
      .reduce((state, event) => evolveMesh(state, { type: event.type, data: event.payload } as MeshEvent), initialMeshState());
  }

  private async call(command: string, send: () => Promise<LedgerReply>): Promise<LedgerReply> {
    let reply: LedgerReply;
    try {
      reply = await send();
    } catch (error) {
      throw new TransientError(`ledger ${command} failed: ${String(error)}`, { cause: error, delayMs: MESH_LEDGER_RETRY_DELAY_MS });
    }
    if (!reply.ok && (reply.error.kind === 'unavailable' || reply.error.kind === 'internal')) {
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
