import { randomUUID } from 'node:crypto';
import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import {
  HoldAnswerSchema,
  MeshAnswerRequestSchema,
  MsgIds,
  OperatorAnswerSchema,
  Subjects,
  type HandoffRecord,
  type LedgerReply,
  type MeshAnswerRequest,
} from '@baton/contracts';
import { decideResume, HandoffErrorCode, stableStringify } from '@baton/domain';
import { InboxItemId, type BatonViews } from '@baton/projections';
import { JetStreamClient, RUNTIME, type ServiceRuntime } from '@baton/platform';
import type { z } from 'zod';
import { RunAnswerRequestSchema, type OperatorAnswer, type RunAnswerRequest, type StopPacket } from '@baton/contracts';
import { PublishTimeout, streamReader, type LedgerClient, type OwnIdAck, type StoredEvent } from '@baton/eventstore';
import { BATON_VIEWS, LEDGER_CLIENT } from '../projection/tokens';
import type { Principal } from '../auth/roles';
import { assertBodyActor, assertCanAnswer, assertVisible } from '../auth/scope';
import { AnswerOutcomes, answerStatusPath, type AnswerAggregate, type AnswerOutcome } from './answer-outcomes';
import { ApiError, ledgerRefusal, notFound, parseOr400, statusForKind } from './http';
import { resolveProject } from './resolve';
import type { AbandonHandoffBodySchema, AnswerAcceptedSchema, HandbackDecisionBodySchema, HoldAnswerBodySchema, StopAnswerBodySchema } from './schemas';

type AnswerAccepted = z.infer<typeof AnswerAcceptedSchema>;

/** What the API answers for an operator answer: 200 with the outcome (applied), or 202 (pending). A refusal is thrown (409). */
export interface AnswerReply {
  status: 200 | 202;
  body: AnswerAccepted;
}

/** What the API answers for an operator's handoff command the ledger applied (a refusal is thrown). */
export interface HandoffActionReply {
  outcome: 'applied';
  handoff: HandoffRecord;
  /** The events this request stored: 0 for a retry of the same key and body. */
  events: number;
}

/**
 * The ledger commands an operator sends through the API for a handoff, and what the event each
 * stores under its key records, for a 409 `idempotency_key_reused` to name: the event, the
 * payload field, the detail it is named as, and the message's words.
 */
const KEYED_COMMANDS = {
  decide_handback: { event: 'handoff.handback_decided', field: 'decision', detail: 'decided', did: 'decided handback', naming: (v: string) => ` (${v})` },
  // The reason may be long: the message only says it differed; `details.abandoned_reason` holds it.
  abandon: { event: 'handoff.abandoned', field: 'reason', detail: 'abandoned_reason', did: 'abandoned handoff', naming: () => ' with another reason' },
} as const;
type KeyedCommand = keyof typeof KEYED_COMMANDS;

/** What was published: the answer's id, its aggregate and subject, and whether the stream had it already. */
interface Published {
  answerId: string;
  aggregate: AnswerAggregate;
  subject: string;
  duplicate: boolean;
}

/**
 * The record an action is for: its id, and its project when the route names it
 * (`/v1/projects/:project/...`); without one the id must be unambiguous among the caller's
 * projects (see {@link resolveProject}: 404, or 409 `ambiguous_id`).
 */
export interface RecordTarget {
  project?: string;
  id: string;
}

/**
 * The operator's actions: answering a stop packet's form or a hold (published to the router on
 * `<prefix>.in.<project>.answer`, JetStream, `Nats-Msg-Id` = `answer:<project>:<answer id>`),
 * deciding a completion handback and withdrawing (abandoning) an open handoff (ledger commands).
 * Each action is checked against the projections first and refused fail-closed (a packet that is
 * not open → 409 `stop_already_answered`); the router and the ledger decide again authoritatively
 * and record any refusal.
 *
 * An answer then waits, at most `NOTIFIER_ANSWER_WAIT_MS`, for the router's decision to appear in
 * the run's (or mesh's) event stream ({@link AnswerOutcomes}) and answers with what happened:
 * applied → 200 with the run's (mesh's) new state; refused (two operators answered at once, and
 * this one lost; the packet changed) → 409 with the code the router recorded; not seen in time →
 * 202 with `status_url`, where `GET` reads the outcome later. A handback decision or an abandon is
 * the ledger's request/reply, which answers with the outcome already: 200 with the handoff, or the
 * ledger's refusal with its code (409 for a state conflict such as an already decided handback).
 *
 * Every action names its record by project and id ({@link RecordTarget}); an id-only request is
 * resolved among the caller's projects and refused 409 `ambiguous_id` when several hold the id.
 *
 * Who answers comes from the authenticated token, never from the body: `answered_by` / the
 * decision's actor is the token's name and `actor_role` its role; a body that names the actor
 * (`answered_by`, `actor`) may only repeat the token's name — another is refused 403
 * `identity_mismatch` before anything is looked up or sent ({@link assertBodyActor}). An item of a
 * project the token may not see answers 404 (as if it did not exist); a viewer's answer is refused
 * 403 `role_forbidden` before anything is published.
 */
/** {@link OperatorActions.earlierUse}: the answer id was refused before; send the answer again as it is. */
const RESEND = Symbol('resend');

@Injectable()
export class OperatorActions {
  private readonly js: JetStreamClient;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(BATON_VIEWS) private readonly views: BatonViews,
    @Inject(LEDGER_CLIENT) private readonly ledger: LedgerClient,
    private readonly outcomes: AnswerOutcomes,
  ) {
    this.js = new JetStreamClient(runtime.nats);
  }

  /**
   * Answer an open stop packet. A run's packet is published as a run answer on
   * `<prefix>.in.<project>.answer`; a handoff mesh's packet (the stop item names its mesh) as a
   * {@link MeshAnswerRequest} on `<prefix>.in.<project>.mesh_answer`, which the router applies to
   * the mesh (raise_cap continues it, deny / acknowledge end it). Idempotent by `answer_id`: a retry of an answer already recorded on
   * the packet answers its outcome again with `duplicate: true` (the same id with another action or
   * fields: 409 `answer_id_reused`); a retry before the router applied it is deduplicated by the
   * stream (checked the same way). Refusals (decided with the domain's `decideResume`): 404
   * `not_found`, 409 `stop_already_answered` / `stale_answer`, 400 `answer_not_allowed`,
   * `answer_incomplete`, `intent_not_offered`, `cap_not_raised`, `schema_violation`; then the
   * router's own refusal, read back from the stream (409 with its code, e.g. `run_not_stopped`
   * when another operator's answer was applied first).
   */
  async answerStop(target: RecordTarget, body: z.infer<typeof StopAnswerBodySchema>, caller: Principal): Promise<AnswerReply> {
    assertBodyActor(caller, body);
    const packetId = target.id;
    const project = await resolveProject(this.views, caller, 'stop', packetId, target.project);
    const record = await this.views.stop(project, packetId);
    if (!record) throw notFound('stop packet', packetId);
    const packet = record.stop;
    assertVisible(caller, packet.project, 'stop packet', packetId);
    assertCanAnswer(caller);
    const meshRunId = record.mesh_run_id ?? (await this.views.inboxItem(InboxItemId.stop(project, packetId)))?.['mesh_run_id'];
    const mesh = typeof meshRunId === 'string' ? meshRunId : null;
    // A packet's `pending_digest` is null when it freezes no call; echoed back, it is no digest.
    // `answered_by`, when sent, is the token's name (checked above): the answer records the token's.
    const { answer_id: answerId, answered_by: _checked, pending_digest: digest, ...rest } = body;
    const fields = digest === null || digest === undefined ? rest : { ...rest, pending_digest: digest };
    const answerOf = (id: string, at: string) =>
      parseOr400(OperatorAnswerSchema, { ...fields, packet_id: packetId, answer_id: id, answered_by: caller.name, answered_at: at });
    if (packet.status !== 'open') {
      const recorded = packet.answer;
      const aggregate: AnswerAggregate =
        mesh !== null ? { project: packet.project, kind: 'mesh', id: mesh } : { project: packet.project, kind: 'run', id: packet.workflow_run_id };
      if (answerId !== undefined && recorded?.answer_id === answerId) {
        const subject = mesh !== null ? Subjects.meshAnswer(this.prefix, packet.project) : Subjects.operatorAnswer(this.prefix, packet.project);
        // A retry of the recorded answer answers its outcome again; the same id with another
        // action or fields is another answer, which the packet will never take.
        if (!sameAnswer(recorded, answerOf(answerId, recorded.answered_at))) {
          throw answerIdReused(answerId, packet.project, mesh !== null ? { mesh_run_id: mesh } : { workflow_run_id: packet.workflow_run_id });
        }
        await this.assertSender(aggregate, answerId, caller);
        return this.settle({ answerId, aggregate, subject, duplicate: true });
      }
      if (answerId !== undefined && (await this.outcomes.wasSent(aggregate, answerId))) {
        // An answer this API sent before, which lost to another (refused, say, run_not_stopped):
        // its retry is sent again as it was, so the stream's duplicate check tells a true retry
        // (its own outcome again) from the same id with another action or note (answer_id_reused).
        await this.assertSender(aggregate, answerId, caller);
        return this.sendStopAnswer(packet, mesh, caller, answerOf(answerId, new Date().toISOString()));
      }
      throw new ApiError(HttpStatus.CONFLICT, 'stop_already_answered', `stop packet ${packetId} was already answered`, [], {
        answer_id: recorded?.answer_id ?? null,
        answered_at: record.answered_at,
      });
    }
    const now = new Date().toISOString();
    const answer = answerOf(answerId ?? `ans-${randomUUID()}`, now);
    if (answerId !== undefined) {
      const aggregate: AnswerAggregate =
        mesh !== null ? { project: packet.project, kind: 'mesh', id: mesh } : { project: packet.project, kind: 'run', id: packet.workflow_run_id };
      const subject = mesh !== null ? Subjects.meshAnswer(this.prefix, packet.project) : Subjects.operatorAnswer(this.prefix, packet.project);
      const earlier = await this.earlierUse(aggregate, subject, answer as unknown as Record<string, unknown>, caller);
      if (earlier === RESEND) return this.sendStopAnswer(packet, mesh, caller, answer);
      if (earlier !== null) return earlier;
    }
    const decided = decideResume(packet, answer, { now, actorRole: caller.role });
    if (!decided.ok) throw new ApiError(statusForKind(decided.error.kind), decided.error.code, decided.error.message, [], decided.error.details);
    return this.sendStopAnswer(packet, mesh, caller, answer);
  }

  /** Publish a stop packet's answer to its mesh run or workflow run, and wait for the outcome. */
  private async sendStopAnswer(packet: StopPacket, mesh: string | null, caller: Principal, answer: OperatorAnswer): Promise<AnswerReply> {
    if (mesh !== null)
      return this.settle(await this.publishMeshAnswer({ mesh_run_id: mesh, project: packet.project, actor_role: caller.role, answer }, caller));
    return this.settle(
      await this.publish(
        {
          workflow_run_id: packet.workflow_run_id,
          project: packet.project,
          actor_role: caller.role,
          answer: { kind: 'stop_answer', answer },
        },
        caller,
      ),
    );
  }

  /**
   * Answer a held run (continue / reroute / terminate). 404 unknown run, 409 `run_not_held`, 400
   * bad answer; then the router's outcome as for a stop packet (200 applied, 409 refused, 202 pending).
   */
  async answerHold(target: RecordTarget, body: z.infer<typeof HoldAnswerBodySchema>, caller: Principal): Promise<AnswerReply> {
    assertBodyActor(caller, body);
    const workflowRunId = target.id;
    const view = await this.views.run(await resolveProject(this.views, caller, 'run', workflowRunId, target.project), workflowRunId);
    if (!view) throw notFound('run', workflowRunId);
    assertVisible(caller, view.run.project, 'run', workflowRunId);
    assertCanAnswer(caller);
    const { answer_id: answerId, answered_by: _checked, ...fields } = body;
    const answerOf = (id: string, at: string) => parseOr400(HoldAnswerSchema, { ...fields, answer_id: id, answered_by: caller.name, answered_at: at });
    const project = view.run.project;
    const now = new Date().toISOString();
    if (answerId !== undefined) {
      // The id may have decided an earlier hold or packet of this run (the run no longer held because
      // of it, or held again since): a retry answers its outcome again, another answer under it is 409.
      const earlier = await this.earlierUse(
        { project, kind: 'run', id: workflowRunId },
        Subjects.operatorAnswer(this.prefix, project),
        answerOf(answerId, now) as unknown as Record<string, unknown>,
        caller,
      );
      if (earlier === RESEND)
        return this.settle(
          await this.publish(
            {
              workflow_run_id: workflowRunId,
              project,
              actor_role: caller.role,
              answer: { kind: 'hold_answer', answer: answerOf(answerId, now) },
            },
            caller,
          ),
        );
      if (earlier !== null) return earlier;
    }
    if (view.run.status !== 'held') {
      // The API's own check: nothing was sent (no `outcome`, no `status_url`: there is no answer to follow).
      throw new ApiError(
        HttpStatus.CONFLICT,
        'run_not_held',
        `run ${workflowRunId} is ${view.run.status}, not held${view.run.open_stop_id ? `; answer its stop packet ${view.run.open_stop_id}` : ''}`,
        [],
        { workflow_run_id: workflowRunId, project, status: view.run.status, ...(view.run.open_stop_id ? { open_stop_id: view.run.open_stop_id } : {}) },
      );
    }
    const answer = answerOf(answerId ?? `ans-${randomUUID()}`, now);
    return this.settle(
      await this.publish({ workflow_run_id: workflowRunId, project, actor_role: caller.role, answer: { kind: 'hold_answer', answer } }, caller),
    );
  }

  /**
   * What an answer id the client chose already decided on this run or mesh, before the answer is
   * sent: an id older than the stream's two-minute duplicate window passes the stream, and the
   * router takes nothing under an id it has decided, so without this check another answer under
   * it would be reported as the earlier one's outcome while nothing happened. Null when the id
   * decided nothing here. Applied: the recorded answer must be this one (everything but
   * `answered_at`: the same packet or hold, action, fields and operator) — its outcome again,
   * `duplicate: true` — else 409 `answer_id_reused`. Refused: a refusal records no answer to
   * compare, so the answer is sent again as it is ({@link RESEND}): within the stream's duplicate
   * window the stream compares it with the message first sent under the id (the same answer: the
   * refusal again; another one: 409 `answer_id_reused`), past it the router, which takes nothing
   * under an id it has decided, leaves the refusal as the outcome.
   */
  private async earlierUse(
    aggregate: AnswerAggregate,
    subject: string,
    answer: Record<string, unknown>,
    caller: Principal,
  ): Promise<AnswerReply | typeof RESEND | null> {
    const answerId = String(answer['answer_id']);
    const checked = await this.outcomes.checkWithEvent(aggregate, answerId);
    if (checked === null || checked.deciding === null) return null;
    if (checked.outcome.outcome === 'applied') {
      const recorded = recordedAnswer(checked.deciding);
      if (recorded === null || !sameAnswer(recorded, answer)) {
        throw answerIdReused(answerId, aggregate.project, aggregate.kind === 'mesh' ? { mesh_run_id: aggregate.id } : { workflow_run_id: aggregate.id });
      }
      await this.assertSender(aggregate, answerId, caller);
      return this.settle({ answerId, aggregate, subject, duplicate: true }, checked.outcome);
    }
    await this.assertSender(aggregate, answerId, caller);
    return RESEND;
  }

  /**
   * An answer id is its sender's: the same answer sent again under it by another token — one with
   * the same name too (the name is all the recorded answer says of who answered) — is another
   * answer, 409 `answer_id_reused`. Compared with the token the notifier remembered as the id's
   * first sender ({@link AnswerOutcomes.sentBy}); an id it does not remember (past its seven days)
   * is compared by its recorded answer alone.
   */
  private async assertSender(aggregate: AnswerAggregate, answerId: string, caller: Principal): Promise<void> {
    const sender = await this.outcomes.sentBy(aggregate, answerId);
    if (sender !== null && sender !== caller.tokenId)
      throw answerIdReused(
        answerId,
        aggregate.project,
        aggregate.kind === 'mesh' ? { mesh_run_id: aggregate.id } : { workflow_run_id: aggregate.id },
        'another_token',
      );
  }

  /**
   * `GET …/answers/:answer_id`: what became of an answer (`applied`, `refused` with its code, or
   * `pending`), read from the run's or mesh's events. 404 when the aggregate does not exist in a
   * project the caller may see.
   */
  async answerStatus(aggregate: AnswerAggregate, answerId: string, caller: Principal): Promise<Record<string, unknown>> {
    const what = aggregate.kind === 'run' ? 'run' : 'mesh run';
    assertVisible(caller, aggregate.project, what, aggregate.id);
    const outcome = await this.outcomes.check(aggregate, answerId);
    if (outcome === null) throw notFound(what, aggregate.id);
    if (outcome.outcome === 'pending' && !(await this.outcomes.wasSent(aggregate, answerId))) {
      throw new ApiError(
        HttpStatus.NOT_FOUND,
        'answer_not_found',
        `no answer ${answerId} was sent for ${what} ${aggregate.id}: an answer the API refused was never sent (its refusal was the reply)`,
        [],
        { answer_id: answerId },
      );
    }
    return { answer_id: answerId, project: aggregate.project, ...this.ids(aggregate), status_url: answerStatusPath(aggregate, answerId), ...outcome };
  }

  /** Wait for the router's decision on a published answer and shape the reply (or throw the refusal). */
  private async settle(published: Published, known?: AnswerOutcome): Promise<AnswerReply> {
    const { answerId, aggregate } = published;
    // `known`: the outcome a retry already read from the stream (no second read of the aggregate).
    const outcome = known ?? (await this.outcomes.wait(aggregate, answerId));
    const statusUrl = answerStatusPath(aggregate, answerId);
    const base: AnswerAccepted = {
      accepted: true,
      answer_id: answerId,
      project: aggregate.project,
      ...this.ids(aggregate),
      subject: published.subject,
      duplicate: published.duplicate,
      status_url: statusUrl,
      outcome: 'pending',
    };
    switch (outcome.outcome) {
      case 'applied':
        return { status: 200, body: { ...base, ...outcome } };
      case 'refused':
        this.runtime.logger.info('operator answer refused by the router', { ...aggregate, answer_id: answerId, code: outcome.code });
        throw new ApiError(HttpStatus.CONFLICT, outcome.code, outcome.message, [], {
          outcome: 'refused',
          answer_id: answerId,
          project: aggregate.project,
          ...this.ids(aggregate),
          event: outcome.event,
          status_url: statusUrl,
        });
      case 'pending':
        return { status: 202, body: base };
    }
  }

  private ids(aggregate: AnswerAggregate): { workflow_run_id: string; mesh_run_id?: string } {
    return aggregate.kind === 'run' ? { workflow_run_id: aggregate.id } : { workflow_run_id: aggregate.id, mesh_run_id: aggregate.id };
  }

  /**
   * Accept or rework a completion handback through the ledger (idempotent by `idempotency_key`,
   * generated when absent). The ledger's request/reply decides synchronously, so the reply is the
   * outcome: 200 `applied` with the decided handback; the ledger's refusals keep their code, with
   * `details.outcome: 'refused'`: 409 for a wrong state (e.g. already decided: two operators
   * deciding at once get one 200 and one 409), 403 forbidden (the worker deciding its own work),
   * 400 for invalid input; 503 when no ledger answers. 404 unknown handoff.
   */
  async decideHandback(target: RecordTarget, body: z.infer<typeof HandbackDecisionBodySchema>, caller: Principal): Promise<HandoffActionReply> {
    assertBodyActor(caller, body);
    const { id: handoffId, project } = await this.handoffTarget(target, caller);
    const key = body.idempotency_key ?? `decide-${randomUUID()}`;
    const command =
      body.decision === 'accept'
        ? { handoff_id: handoffId, decision: 'accept' as const, ...(body.note !== undefined ? { note: body.note } : {}), idempotency_key: key }
        : { handoff_id: handoffId, decision: 'rework' as const, note: body.note ?? '', idempotency_key: key };
    // Sent on `<prefix>.cmd.ledger.<project>.op.notifier.decide_handback`: the ledger records the
    // token's name as an operator, with the token's role.
    const reply = await this.ledger.decideHandback(project, command, { operator: { name: caller.name, role: caller.role } });
    return this.handoffOutcome('decide_handback', project, handoffId, key, reply);
  }

  /**
   * Withdraw a handoff that is still open (pending, claimed or returned) through the ledger's
   * `abandon`, as the token's operator: idempotent by `idempotency_key` (generated when absent),
   * answered as a handback decision is: 200 `applied` with the abandoned handoff (`events` 0 for a
   * retry of the same key and reason), or the ledger's refusal with its code — 409
   * `handoff_not_open` (it ended already), 403 `review_end_forbidden` (the token names the worker
   * whose work the handback reviews), 409 `idempotency_key_reused` (the key abandoned it with
   * another reason). 404 unknown handoff. The run waiting on it sees `handoff_abandoned`.
   */
  async abandonHandoff(target: RecordTarget, body: z.infer<typeof AbandonHandoffBodySchema>, caller: Principal): Promise<HandoffActionReply> {
    assertBodyActor(caller, body);
    const { id: handoffId, project } = await this.handoffTarget(target, caller);
    const key = body.idempotency_key ?? `abandon-${randomUUID()}`;
    // Sent on `<prefix>.cmd.ledger.<project>.op.notifier.abandon`, the token's name and role as the operator.
    const reply = await this.ledger.abandon(
      project,
      { handoff_id: handoffId, reason: body.reason, idempotency_key: key },
      { operator: { name: caller.name, role: caller.role } },
    );
    return this.handoffOutcome('abandon', project, handoffId, key, reply);
  }

  /** The handoff an action is for, in a project the caller may see (404 otherwise), once the caller may act (403 for a viewer). */
  private async handoffTarget(target: RecordTarget, caller: Principal): Promise<{ id: string; project: string }> {
    const project = await resolveProject(this.views, caller, 'handoff', target.id, target.project);
    const view = await this.views.handoff(project, target.id);
    if (!view) {
      // The projection may not have applied a handoff created milliseconds ago: when the route
      // names the project (the caller may see it), the ledger — which holds the handoff — decides,
      // and answers not_found (404) for one that does not exist. An id-only route has only the
      // projection to find the project by.
      if (target.project === undefined) throw notFound('handoff', target.id);
      assertCanAnswer(caller);
      return { id: target.id, project };
    }
    assertVisible(caller, view.handoff.project, 'handoff', target.id);
    assertCanAnswer(caller);
    return { id: target.id, project: view.handoff.project };
  }

  /** The ledger's reply to an operator's handoff command: the applied outcome, or its refusal as the API answers it. */
  private async handoffOutcome(command: KeyedCommand, project: string, handoffId: string, key: string, reply: LedgerReply): Promise<HandoffActionReply> {
    if (reply.ok) return { outcome: 'applied', handoff: reply.handoff, events: reply.events };
    if (reply.error.code === HandoffErrorCode.idempotencyKeyReused) throw await this.keyReused(command, project, handoffId, key);
    // A refusal of the action itself (a state conflict: already decided or ended by someone else;
    // the worker ending its own review) says so, like a refused answer; unavailability does not.
    const refused = reply.error.kind === 'wrong_state' || reply.error.kind === 'forbidden' || reply.error.kind === 'invalid';
    throw ledgerRefusal(reply.error, key, refused ? { outcome: 'refused', handoff_id: handoffId, project } : {});
  }

  /**
   * The ledger refused the key: this operator used it for the same command with another body (the
   * other decision or another note; another abandon reason; handoffs.md rule 13). 409
   * `idempotency_key_reused` (as `answer_id_reused` for answers), naming what the key recorded
   * ({@link KEYED_COMMANDS}: the decision, or the abandon's reason).
   */
  private async keyReused(command: KeyedCommand, project: string, handoffId: string, key: string): Promise<ApiError> {
    const keyed = KEYED_COMMANDS[command];
    const { events } = await this.runtime.store.read({ project, kind: 'handoff', id: handoffId });
    const stored = events.find((e) => e.type === keyed.event && (e.payload as { idempotency_key?: unknown }).idempotency_key === key);
    const recorded = stored ? (stored.payload as Record<string, unknown>)[keyed.field] : undefined;
    const named = typeof recorded === 'string' ? recorded : undefined;
    return new ApiError(
      HttpStatus.CONFLICT,
      HandoffErrorCode.idempotencyKeyReused,
      `idempotency_key ${key} already ${keyed.did} ${handoffId}${named !== undefined ? keyed.naming(named) : ''}; send a new key`,
      [],
      {
        idempotency_key: key,
        command,
        outcome: 'refused',
        handoff_id: handoffId,
        project,
        ...(named !== undefined ? { [keyed.detail]: named } : {}),
      },
    );
  }

  /**
   * The stream already held a message with this answer's id (its duplicate window): it stored
   * nothing now. A retry of the same answer (same run or mesh, same packet, same action and fields)
   * is what the id is for; the same id on another run or packet, or with another action, would be
   * dropped without a word and wait for a decision that never comes — refused 409
   * `answer_id_reused`, naming what the id was used for.
   */
  private async assertRetryOf(ack: OwnIdAck, sent: RunAnswerRequest | MeshAnswerRequest): Promise<void> {
    // The publish read the stored duplicate already to check its subject; read it only if it did not.
    const stored = ack.stored !== undefined ? ack.stored : await streamReader(this.runtime.nats, ack.stream).message(ack.seq);
    let earlier: Record<string, unknown> | null = null;
    try {
      earlier = stored ? (JSON.parse(new TextDecoder().decode(stored.data)) as Record<string, unknown>) : null;
    } catch {
      earlier = null;
    }
    // The stored message may be gone (the stream's limits): nothing to compare, taken as a retry.
    if (earlier === null) return;
    if (sameAnswer(earlier, sent as unknown as Record<string, unknown>)) return;
    const answerId = 'mesh_run_id' in sent ? sent.answer.answer_id : sent.answer.answer.answer_id;
    throw answerIdReused(answerId, sent.project, {
      ...('workflow_run_id' in earlier ? { workflow_run_id: earlier['workflow_run_id'] } : {}),
      ...('mesh_run_id' in earlier ? { mesh_run_id: earlier['mesh_run_id'] } : {}),
    });
  }

  private get prefix(): string {
    return this.runtime.config.BATON_PREFIX;
  }

  /**
   * Publish an answer. When the stream does not confirm it in time the answer may be stored or
   * not: 503 `answer_outcome_unknown` with its `answer_id` (generated here when the client sent
   * none) and `status_url` — sending the same `answer_id` again is safe, a new one would be a
   * second answer. It used to be a 500 without the id.
   */
  private async sent(aggregate: AnswerAggregate, answerId: string, publish: () => Promise<OwnIdAck>): Promise<OwnIdAck> {
    try {
      return await publish();
    } catch (error) {
      if (!(error instanceof PublishTimeout)) throw error;
      this.runtime.logger.warn('answer publish not confirmed in time', {
        answer_id: answerId,
        project: aggregate.project,
        [`${aggregate.kind}_id`]: aggregate.id,
      });
      throw new ApiError(
        HttpStatus.SERVICE_UNAVAILABLE,
        'answer_outcome_unknown',
        `the answer was sent but the stream did not confirm it in time: it may be stored. Send the same answer_id (${answerId}) again, or read status_url`,
        [],
        { answer_id: answerId, status_url: answerStatusPath(aggregate, answerId), retry_after_sec: 1 },
      );
    }
  }

  /** Log an answer whose message id another publisher had taken on another subject (it was stored under another id). */
  private warnTaken(ack: OwnIdAck, answerId: string): void {
    if (ack.foreign.length === 0) return;
    this.runtime.logger.warn('answer id taken by another publisher; published under another id', {
      answer_id: answerId,
      stored_as: ack.msgId,
      taken_by: ack.foreign,
    });
  }

  private async publishMeshAnswer(request: MeshAnswerRequest, caller: Principal): Promise<Published> {
    const body = MeshAnswerRequestSchema.parse(request);
    const subject = Subjects.meshAnswer(this.prefix, body.project);
    const answerId = body.answer.answer_id;
    const ack = await this.sent({ project: body.project, kind: 'mesh', id: body.mesh_run_id }, answerId, () =>
      this.js.publishOwned(subject, body, MsgIds.meshAnswer(body.project, body.mesh_run_id, answerId)),
    );
    if (ack.duplicate) {
      await this.assertRetryOf(ack, body);
      await this.assertSender({ project: body.project, kind: 'mesh', id: body.mesh_run_id }, answerId, caller);
    }
    this.warnTaken(ack, answerId);
    await this.outcomes.markSent({ project: body.project, kind: 'mesh', id: body.mesh_run_id }, answerId, caller.tokenId);
    this.runtime.logger.info('operator mesh answer published', {
      mesh_run_id: body.mesh_run_id,
      answer_id: answerId,
      action: body.answer.action,
      duplicate: ack.duplicate,
    });
    return { answerId, aggregate: { project: body.project, kind: 'mesh', id: body.mesh_run_id }, subject, duplicate: ack.duplicate };
  }

  private async publish(request: RunAnswerRequest, caller: Principal): Promise<Published> {
    const body = RunAnswerRequestSchema.parse(request);
    const subject = Subjects.operatorAnswer(this.prefix, body.project);
    const answerId = body.answer.answer.answer_id;
    const ack = await this.sent({ project: body.project, kind: 'run', id: body.workflow_run_id }, answerId, () =>
      this.js.publishOwned(subject, body, MsgIds.answer(body.project, body.workflow_run_id, answerId)),
    );
    if (ack.duplicate) {
      await this.assertRetryOf(ack, body);
      await this.assertSender({ project: body.project, kind: 'run', id: body.workflow_run_id }, answerId, caller);
    }
    this.warnTaken(ack, answerId);
    await this.outcomes.markSent({ project: body.project, kind: 'run', id: body.workflow_run_id }, answerId, caller.tokenId);
    this.runtime.logger.info('operator answer published', {
      workflow_run_id: body.workflow_run_id,
      answer_id: answerId,
      kind: body.answer.kind,
      duplicate: ack.duplicate,
    });
    return { answerId, aggregate: { project: body.project, kind: 'run', id: body.workflow_run_id }, subject, duplicate: ack.duplicate };
  }
}

/**
 * 409 `answer_id_reused`: the answer id was used for another answer (`used_for` names the run or
 * mesh it went to).
 */
function answerIdReused(answerId: string, project: string, usedFor: Record<string, unknown>, reason?: 'another_token'): ApiError {
  const where =
    typeof usedFor['mesh_run_id'] === 'string'
      ? ` of mesh ${usedFor['mesh_run_id']}`
      : typeof usedFor['workflow_run_id'] === 'string'
        ? ` of run ${usedFor['workflow_run_id']}`
        : '';
  return new ApiError(
    HttpStatus.CONFLICT,
    'answer_id_reused',
    reason === 'another_token'
      ? `answer_id ${answerId} was already used${where} in project ${project} by another token (an answer_id is its sender's, whatever the name); send a new answer_id`
      : `answer_id ${answerId} was already used for another answer${where} in project ${project} (an answer_id is unique within its run or mesh); send a new answer_id`,
    [],
    { answer_id: answerId, project, used_for: usedFor, ...(reason !== undefined ? { reason } : {}) },
  );
}

/** The answer an applied answer's event recorded: `run.resumed`'s `from.answer`, `mesh.stop_answered`'s `answer`. */
function recordedAnswer(deciding: StoredEvent): Record<string, unknown> | null {
  const payload = deciding.payload as { from?: { answer?: Record<string, unknown> }; answer?: Record<string, unknown> };
  return (deciding.type === 'run.resumed' ? payload.from?.answer : payload.answer) ?? null;
}

/** Whether `retry` is the answer `earlier` sent again: the same {@link retryShape}. */
function sameAnswer(earlier: Record<string, unknown>, retry: Record<string, unknown>): boolean {
  return stableStringify(retryShape(earlier)) === stableStringify(retryShape(retry));
}

/**
 * What makes two published answers the same answer: everything but when it was sent
 * (`answered_at`, set by each attempt).
 */
function retryShape(body: Record<string, unknown>): unknown {
  const strip = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    const { answered_at: _at, ...rest } = value as Record<string, unknown>;
    return Object.fromEntries(Object.entries(rest).map(([key, member]) => [key, strip(member)]));
  };
  return strip(body);
}
