import { Inject, Injectable, Optional, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import {
  edgeAnswerForm,
  edgeBodyRefusal,
  edgeRefusalAnswer,
  type EdgeRefusal,
  type EdgeRefusalIssue,
  foreignMsgId,
  Limits,
  parseEdgeSubject,
  readEdgeInput,
  RejectionCode,
  replyRefusal,
  Subjects,
  type EdgeRefusalReason,
  type EdgeRoute,
  type StartRunRequest,
} from '@baton/contracts';
import {
  batonStreamNames,
  DeadLetterReason,
  DlqSources,
  newUniqueId,
  REFUSED_LETTER_BYTES,
  subscribeCore,
  UnreadableHeadersError,
  type CoreMessage,
  type CoreSubscription,
} from '@baton/eventstore';
import { METRICS, natsAuthenticated, RUNTIME, type BatonMetrics, type RefusedLetters, type ServiceRuntime } from '@baton/platform';
import { ProjectDirectory } from '../projects/project-directory';
import { EDGE_REFUSED_LETTERS } from './refusal-tokens';
import { TerminatedOffers } from './terminated-offers';

/** JetStream's headers an agent may set through its edge: the message id; any other `Nats-…` is dropped. */
function dropsHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('nats-') && lower !== 'nats-msg-id';
}

/** The name JetStream deduplicates on: this spelling alone (nats-server 2.9 reads header names as written). */
const MSG_ID_HEADER = 'Nats-Msg-Id';

/**
 * The message id an inbox message carries, or why the edge refuses its id header: the id goes in
 * `Nats-Msg-Id`, spelled so and given once. A `nats-msg-id` (any other case) before it would be read
 * by a check that ignores case while JetStream deduplicates on the exact `Nats-Msg-Id` after it —
 * another project's id stored past the check; two values leave which one counts to the server.
 */
function messageIdOf(headers: Record<string, string[]>): { id: string | undefined } | { refused: string } {
  let id: string | undefined;
  for (const [key, values] of Object.entries(headers)) {
    if (key.toLowerCase() !== 'nats-msg-id') continue;
    if (key !== MSG_ID_HEADER) return { refused: `the message id header is ${MSG_ID_HEADER}, spelled so; not ${JSON.stringify(key.slice(0, 40))}` };
    if (values.length !== 1) return { refused: `a message carries one ${MSG_ID_HEADER}, not ${values.length}` };
    id = values[0];
  }
  return { id };
}

/** Ids of this form are the dead-letter redrive's (`redrive:<stream>:<seq>`): an agent taking one first would drop that redrive as a duplicate. */
const REDRIVE_ID_PREFIX = 'redrive:';

/** Queue group of every ledger instance's edge subscription: each message is relayed once. */
export const EDGE_QUEUE = 'ledger-edge';

/** Dead-letter source of edge messages relayed nowhere (`<prefix>.dlq.ledger-edge`). */
export const EDGE_DLQ_SOURCE = DlqSources.ledgerEdge;

/**
 * The agent edge (`libs/contracts/src/edge.ts`): agents may publish nothing JetStream reads,
 * because JetStream answers on whatever reply subject a client sets, with the server's rights —
 * a result's publish ack, a pulled offer or an acknowledgement's confirmation aimed at an event
 * subject, another project's inbox or `$JS.API.STREAM.DELETE.<stream>`. They publish on
 * `<prefix>.edge.…`; this relay sends each message on to what it stands for (a result, start or
 * message into the inbox; a pull, consumer info or acknowledgement of the agent's own offers
 * durable), bytes and headers as they came, with the agent's reply subject — JetStream then
 * answers the agent directly, and the relay adds no round trip of its own.
 *
 * A reply subject Baton may not answer on (`replyRefusal`, the one decision the ledger's commands
 * take too) is relayed nowhere and recorded as a dead letter (`reply_not_allowed`), as is an edge
 * subject that stands for nothing an agent may reach: with authentication on, anything but the
 * sender's own inbox (or, on a project's shared subject, an inbox of one of its agents); in either
 * mode, anything under Baton's own subjects (`<prefix>.…`: JetStream would store its ack there),
 * JetStream's (`$…`) or an agent's notice subject. Without authentication clients keep NATS's
 * default inbox, so any other plain subject is relayed.
 *
 * Each sender (as the subject names it) writes at most its budget of such letters a minute
 * ({@link RefusedLetters}, `BATON_REFUSED_LETTERS_PER_MINUTE`); the refusals beyond it are
 * counted and written as one `refusals_suppressed` letter when its minute ends, so a sender
 * refused in a loop can neither push other letters out of the shared DLQ nor spend the ledger's
 * time writing them. Messages relayed never meet the cap.
 */
@Injectable()
export class AgentEdgeRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private subscription: CoreSubscription | null = null;
  private readonly inboxStream: string;
  /** The ledger connects with authentication (`natsAuthenticated`): reply subjects are then the sender's own inbox only. */
  private readonly authenticated: boolean;
  private relayed = 0;
  /**
   * A sender whose run start waits on a read of its project's definition: its later messages wait
   * behind it, relayed in the order they came (a start, then a message to that run).
   */
  private readonly held = new Map<string, Promise<void>>();

  /** `baton_edge_messages_total` of each route relayed (bound once: the relay is on every agent message's path). */
  private readonly relayedMetric: Record<EdgeRoute['kind'], { inc(): void }> | null;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(EDGE_REFUSED_LETTERS) private readonly letters: RefusedLetters,
    @Inject(TerminatedOffers) private readonly terminated: TerminatedOffers,
    @Inject(ProjectDirectory) private readonly projects: ProjectDirectory,
    @Optional() @Inject(METRICS) private readonly metrics: BatonMetrics | null = null,
  ) {
    this.inboxStream = batonStreamNames(runtime.config.BATON_PREFIX).inbox;
    this.authenticated = natsAuthenticated(runtime.config);
    const relayed = (route: EdgeRoute['kind']) => metrics?.edgeMessages.labels(route, 'relayed');
    const input = relayed('input');
    const api = relayed('api');
    const ack = relayed('ack');
    this.relayedMetric = input && api && ack ? { input, api, ack } : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    const subject = Subjects.agentEdge(this.runtime.config.BATON_PREFIX);
    this.subscription = subscribeCore(this.runtime.nats, subject, (msg) => this.relay(msg), {
      queue: EDGE_QUEUE,
      onError: (err) => this.runtime.logger.error(`agent edge subscription failed: ${err.message}`, { subject }),
    });
    // The server knows the subscription before the service reports ready.
    await this.runtime.nats.connection.flush();
  }

  async onModuleDestroy(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = null;
    if (subscription && !subscription.isClosed()) await subscription.drain().catch(() => undefined);
    // Starts still waiting on their project's definition are relayed or refused before the connection goes.
    while (this.held.size > 0) await Promise.all([...this.held.values()]);
    // What was suppressed in windows still open is written now, not dropped with the process.
    await this.letters.stop();
  }

  /** Messages relayed so far (health and tests). */
  relayedCount(): number {
    return this.relayed;
  }

  /** Refused messages not written as letters of their own (summed up in `refusals_suppressed` letters) so far. */
  suppressedCount(): number {
    return this.letters.suppressed;
  }

  private relay(msg: CoreMessage): void {
    const route = parseEdgeSubject(this.runtime.config.BATON_PREFIX, msg.subject, this.inboxStream);
    const waiting = this.held.get(route.sender);
    if (waiting !== undefined) {
      this.hold(
        route.sender,
        waiting.then(() => this.pass(msg, route)),
      );
      return;
    }
    const pending = this.pass(msg, route);
    if (pending !== undefined) this.hold(route.sender, pending);
  }

  /** Keep `sender`'s later messages behind `work` until it settles. */
  private hold(sender: string, work: Promise<void>): void {
    const held: Promise<void> = work
      .catch((error: unknown) => this.runtime.logger.error(`agent edge relay failed: ${(error as Error).message}`, { sender }))
      .finally(() => {
        if (this.held.get(sender) === held) this.held.delete(sender);
      });
    this.held.set(sender, held);
  }

  /** Relay or refuse one message; a promise when it waits on a read (a run start's definition check). */
  private pass(msg: CoreMessage, route: EdgeRoute | EdgeRefusal): Promise<void> | undefined {
    const prefix = this.runtime.config.BATON_PREFIX;
    if ('refused' in route) {
      this.refuse(msg, route, 'none', DeadLetterReason.noHandler, route.refused);
      return;
    }
    const foreignReply = msg.reply === undefined ? null : this.replyRefusalOf(route, msg.reply);
    if (foreignReply !== null) {
      this.refuse(msg, route, route.kind, DeadLetterReason.replyNotAllowed, `reply subject ${msg.reply} ${foreignReply}`);
      return;
    }
    // JetStream's own headers other than the message id are not the agent's to set: an expectation
    // (`Nats-Expected-Last-Msg-Id`…) is answered with what the stream holds — another project's
    // message ids — and the rest change how the stream stores it.
    // An inbox message over the cap is refused here, its letter cut to its first bytes: relayed, the
    // consumer that refuses it would keep all of it in the shared DLQ.
    if (route.kind === 'input' && msg.data.length > Limits.maxMessageBytes) {
      this.refuse(
        msg,
        route,
        route.kind,
        RejectionCode.payloadTooLarge,
        `an inbox message is at most ${Limits.maxMessageBytes} bytes; this one is ${msg.data.length}`,
      );
      return;
    }
    const badBody = edgeBodyRefusal(route, msg.data);
    if (badBody !== null) {
      this.refuse(msg, route, route.kind, DeadLetterReason.schemaViolation, badBody);
      return;
    }
    // The stream's duplicate window would hold a message id naming another project or kind as taken
    // (its real message then dropped as a duplicate): refused here, before anything is stored.
    if (route.kind === 'input') {
      const msgId = messageIdOf(msg.headers);
      if ('refused' in msgId) {
        this.refuse(msg, route, route.kind, DeadLetterReason.schemaViolation, msgId.refused);
        return;
      }
      const foreign = msgId.id?.startsWith(REDRIVE_ID_PREFIX)
        ? `the Nats-Msg-Id ${JSON.stringify(msgId.id.slice(0, 200))} is of the form the dead-letter redrive uses; an agent's message may not take one`
        : foreignMsgId(prefix, route.target, msgId.id);
      if (foreign !== null) {
        this.refuse(msg, route, route.kind, DeadLetterReason.msgIdMismatch, foreign);
        return;
      }
      // What its consumer would refuse (a body that is not its kind's, another project or agent in
      // it, an id of another message) is refused here, answered at once, instead of stored,
      // acknowledged as stored and then dead-lettered where only an operator sees it.
      const input = readEdgeInput(route, msg.data, msgId.id);
      if ('refused' in input) {
        this.refuse(msg, route, route.kind, input.refused.reason, input.refused.detail, input.refused.issues);
        return;
      }
      // A start of a workflow the project does not define would be stored, acknowledged and then
      // dead-lettered by the router: refused here, answered at once. Read fresh before refusing.
      if (route.inbox === 'start') {
        // The body was read with the start's schema (`InboxBodySchemas.start`).
        const { workflow, workflow_version: version } = input.body as unknown as StartRunRequest;
        if (!this.projects.keptNames(route.project, workflow, version)) return this.checkStart(msg, route, workflow, version);
      }
    }
    this.forward(msg, route);
  }

  /** Relay a run start whose workflow the kept definition does not name once a fresh read finds it; refuse it (`unknown_workflow`) when it surely is not. */
  private async checkStart(msg: CoreMessage, route: Extract<EdgeRoute, { kind: 'input' }>, workflow: string, version: number | undefined): Promise<void> {
    let found: Awaited<ReturnType<ProjectDirectory['startable']>>;
    try {
      found = await this.projects.startable(route.project, workflow, version);
    } catch (error) {
      // The router reads the definition again and decides: a store that did not answer refuses nothing here.
      this.runtime.logger.warn(`agent edge: the definition of project ${route.project} could not be read; the start is relayed for the router to check`, {
        error: (error as Error).message,
      });
      found = { verdict: 'unsure' };
    }
    if (found.verdict === 'undefined') {
      const pinned = version === undefined ? '' : ` v${version}`;
      this.refuse(msg, route, route.kind, RejectionCode.unknownWorkflow, `${found.detail}: a run of '${workflow}'${pinned} cannot start`);
      return;
    }
    this.forward(msg, route);
  }

  /** Send a message on to what it stands for, with the sender's reply subject. */
  private forward(msg: CoreMessage, route: EdgeRoute): void {
    try {
      msg.relay(route.target, msg.reply, dropsHeader);
    } catch (error) {
      if (!(error instanceof UnreadableHeadersError)) throw error;
      this.refuse(msg, route, route.kind, DeadLetterReason.schemaViolation, `headers NATS cannot carry on: ${error.message}`);
      return;
    }
    this.relayed++;
    this.relayedMetric?.[route.kind].inc();
    // An offer terminated without a give-up is given up for its agent (after a grace the SDK's own give-up uses).
    if (route.kind === 'ack') this.terminated.observe(route, msg.data);
  }

  /**
   * Why the edge must not relay a message of `sender` with `reply` — nor answer its refusal there —
   * or null when it may (`replyRefusal`, one decision with the ledger's command answers).
   */
  private replyRefusalOf(sender: Pick<EdgeRoute, 'project' | 'agent'>, reply: string): string | null {
    return replyRefusal(this.runtime.config.BATON_PREFIX, { via: 'edge', project: sender.project, agent: sender.agent }, reply, this.authenticated);
  }

  /**
   * Record a message relayed nowhere, and tell its sender why. One letter per subject, body and
   * reply subject (a second try with another reply is recorded too), keeping the first
   * {@link REFUSED_LETTER_BYTES} bytes — while the sender's budget lasts; after that it is only
   * counted, for its window's summary letter. The sender is answered on its reply subject when it
   * may be answered there (`replyRefusalOf`, as for a relay), in the form a JetStream client reads
   * (`edgeRefusalAnswer`): every refusal, within the budget or past it — the answer costs the
   * sender as much as its message did, and goes nowhere else. A reply subject that is not its own
   * (`reply_not_allowed`) is never answered.
   */
  private refuse(
    msg: CoreMessage,
    sender: EdgeRoute | EdgeRefusal,
    route: EdgeRoute['kind'] | 'none',
    reason: EdgeRefusalReason | typeof DeadLetterReason.replyNotAllowed,
    detail: string,
    issues?: readonly EdgeRefusalIssue[],
  ): void {
    const { outcome } = this.letters.refuse(
      sender.sender,
      {
        prefix: this.runtime.config.BATON_PREFIX,
        source: EDGE_DLQ_SOURCE,
        reason,
        detail,
        subject: msg.subject,
        headers: msg.headers,
        data: msg.data,
        deliveries: 1,
        stream: `core-${newUniqueId()}`,
        seq: 0,
        consumer: this.runtime.instance,
        keepBytes: REFUSED_LETTER_BYTES,
        ...(msg.reply !== undefined ? { reply: msg.reply } : {}),
      },
      'edge message refused',
    );
    this.metrics?.edgeMessages.inc({ route, outcome });
    if (reason === DeadLetterReason.replyNotAllowed || msg.reply === undefined) return;
    if (this.replyRefusalOf(sender, msg.reply) !== null) return;
    const answer = edgeRefusalAnswer(edgeAnswerForm(sender), reason, detail, issues);
    if (answer.form === 'json') msg.answerOn(msg.reply, textEncoder.encode(JSON.stringify(answer.body)));
    else msg.answerOn(msg.reply, new Uint8Array(0), { status: { code: answer.code, description: answer.description }, headers: answer.headers });
  }
}

const textEncoder = new TextEncoder();
