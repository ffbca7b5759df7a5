// The router's refusal specs (foreign, idle and lettered refusals): the router in-process on a test's
// own prefix with a small letter budget, the `ship` workflow of project `acme`, and readers of what
// the refusals left — the run's events, the sender's letters, the router's counters.
import { MsgIds, Subjects } from '@baton/contracts';
import { batonStreamNames, DlqHeader, type JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { durableNameFor, type BatonMetrics } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { publishDefinition, shipDefinition, startInProcess, type InProcessDeployment } from './support';

/** The project every refusal spec's runs belong to. */
export const REFUSAL_PROJECT = 'acme';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A letter of a sender's result: its reason, the inbox sequence of the result, its detail and body (JSON when it parses). */
export interface ResultLetter {
  reason: string;
  seq: number;
  detail: string;
  body: unknown;
}

export interface RefusalFixture {
  /** The running deployment (set once `beforeAll` ran). */
  readonly deployment: InProcessDeployment;
  readonly prefix: string;
  readonly nats: NatsHandle;
  readonly store: JetStreamEventStore;
  /** Run `id`'s events, oldest first. */
  runEvents(id: string): Promise<StoredEvent[]>;
  /** Start run `run` of the `ship` workflow and wait until it is routed to its entry step (coder). */
  startRun(run: string): Promise<void>;
  /** A result of `agent` naming run `run` and its entry handoff, under a claim it does not hold (2 KB of body): its inbox sequence. */
  publishResult(agent: string, run: string, id: string): Promise<number>;
  /** Wait until the router's results consumer has settled every inbox message up to `seq`. */
  settled(seq: number): Promise<void>;
  /** The dead letters whose original subject is `agent`'s result subject, oldest first. */
  lettersOf(agent: string): Promise<ResultLetter[]>;
  /** The value of counter `name` with these labels in `metrics` (0 when never counted). */
  counted(metrics: BatonMetrics, name: string, labels: Record<string, string>): Promise<number>;
  /** Run `close` in `afterAll` before the deployment closes (jest runs `afterAll` hooks in the order they were declared: the fixture's first). */
  beforeClose(close: () => Promise<void>): void;
}

/**
 * Register `beforeAll` / `afterAll` that start the router in-process (prefix tag `tag`) with a letter
 * budget of `letters` a minute and the default refusal caps, and publish the `ship` workflow
 * (`helper`: with its helper agent); return the fixture's readers.
 */
export function refusalFixture(options: { tag: string; letters: number; helper?: boolean }): RefusalFixture {
  const P = REFUSAL_PROJECT;
  let deployment: InProcessDeployment | undefined;
  const closers: Array<() => Promise<void>> = [];
  const running = (): InProcessDeployment => {
    if (deployment === undefined) throw new Error('the refusal fixture is used before its beforeAll ran');
    return deployment;
  };

  beforeAll(async () => {
    deployment = await startInProcess({
      tag: options.tag,
      services: ['router'],
      env: { BATON_REFUSED_LETTERS_PER_MINUTE: String(options.letters), ROUTER_FOREIGN_REFUSALS_PER_RUN: '' },
    });
    const reply = await publishDefinition(deployment.nats, deployment.prefix, P, shipDefinition(P, { helper: options.helper ?? false }));
    expect(reply).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(async () => {
    for (const close of closers.splice(0)) await close();
    await deployment?.close();
  }, 20_000);

  const runEvents = async (id: string) => (await running().store.read({ project: P, kind: 'run', id })).events;

  return {
    get deployment() {
      return running();
    },
    get prefix() {
      return running().prefix;
    },
    get nats() {
      return running().nats;
    },
    get store() {
      return running().store;
    },
    runEvents,
    async startRun(run) {
      const { nats, prefix } = running();
      await nats.js.publish(
        Subjects.runStart(prefix, P),
        encoder.encode(JSON.stringify({ workflow_run_id: run, project: P, workflow: 'ship', started_by: 'sam', input: 'build it' })),
        { msgID: MsgIds.start(P, run) },
      );
      await waitFor(async () => ((await runEvents(run)).some((e) => e.type === 'run.routed') ? true : undefined), `${run} on its entry step (coder)`);
    },
    async publishResult(agent, run, id) {
      const { nats, prefix } = running();
      const body = {
        result_id: id,
        run_id: `ar-${id}`,
        project: P,
        workflow_run_id: run,
        agent,
        produced_at: new Date().toISOString(),
        body: 'y'.repeat(2_000),
        handoff_id: `ho-s-${run}`,
        claim_id: `claim-made-up-${id}`,
      };
      return (await nats.js.publish(Subjects.agentResult(prefix, P, agent), encoder.encode(JSON.stringify(body)), { msgID: MsgIds.result(P, run, id) })).seq;
    },
    async settled(seq) {
      const { nats, prefix } = running();
      await waitFor(async () => {
        const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, durableNameFor('router', '{prefix}.in.*.result.*'));
        return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq >= seq ? true : undefined;
      }, 'the results consumer to settle every result');
    },
    async lettersOf(agent) {
      const { nats, prefix } = running();
      const stream = batonStreamNames(prefix).dlq;
      const info = await nats.jsm.streams.info(stream);
      const out: ResultLetter[] = [];
      for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
        const msg = await nats.jsm.streams.getMessage(stream, { seq }).catch(() => null);
        if (msg === null || msg.header.get(DlqHeader.subject) !== Subjects.agentResult(prefix, P, agent)) continue;
        const text = decoder.decode(msg.data);
        let body: unknown = text;
        try {
          body = JSON.parse(text) as unknown;
        } catch {
          // a letter cut short, or not JSON: its text
        }
        out.push({ reason: msg.header.get(DlqHeader.reason), seq: Number(msg.header.get(DlqHeader.seq)), detail: msg.header.get(DlqHeader.detail), body });
      }
      return out;
    },
    beforeClose(close) {
      closers.push(close);
    },
    async counted(metrics, name, labels) {
      const metric = await metrics.registry.getSingleMetric(name)?.get();
      return metric?.values.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value))?.value ?? 0;
    },
  };
}
