import { MsgIds, Subjects, createEventRegistry } from '@baton/contracts';
import { batonStreamNames, eventHeaders, headersFrom, type NatsHandle } from '@baton/eventstore';
import { batonProjections, createProjectionStore, foldScenario, scenarioEnvelope, scenarioSteps, type RedisHandle } from '@baton/projections';
import { projectionPrefix } from './tokens';

/*
 * What the notifier's projection specs share: the example scenario stored once per project as the
 * event store stores it, a wait until every projection has applied the whole stream, the notices
 * heard on `<prefix>.notice.>` counted by (project, notice_id), and the notifier's log lines.
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The events that carry a human action notice. */
const NOTICE_EVENTS: ReadonlySet<string> = new Set(['run.notice_emitted', 'mesh.notice_emitted']);

/** The example scenario, stored in the projects of one prefix: `publish(n)` stores it in project `p<n>`. */
export function scenarioStream(nats: NatsHandle, prefix: string) {
  const registry = createEventRegistry();
  const template = foldScenario(scenarioSteps({ project: 'zzz' }));
  return {
    /** How many notices one project's scenario carries. */
    noticesPerProject: template.filter((e) => NOTICE_EVENTS.has(e.event.type)).length,
    /**
     * Store the scenario once in project `p<n>` (its notices have ids of their own there); acks
     * awaited together. `payload` may change an event's payload before it is stored (a larger
     * handoff context…).
     */
    async publish(n: number, payload?: (type: string, payload: Record<string, unknown>) => Record<string, unknown>): Promise<void> {
      const project = `p${n}`;
      const acks: Promise<unknown>[] = [];
      for (const [index, e] of template.entries()) {
        const stored = scenarioEnvelope(registry, e, `ev-${n}-${index}`, project);
        const renamed = JSON.parse(JSON.stringify(stored.payload).split('"zzz"').join(`"${project}"`)) as Record<string, unknown>;
        const envelope = { ...stored, payload: payload ? payload(stored.type, renamed) : renamed };
        acks.push(
          nats.js.publish(Subjects.aggregate(prefix, project, e.aggregate, e.id), encoder.encode(JSON.stringify(envelope)), {
            msgID: MsgIds.event(project, e.aggregate, e.id, envelope.id),
            headers: headersFrom(eventHeaders(registry, envelope.type, envelope.version)),
          }),
        );
      }
      await Promise.all(acks);
    },
  };
}

/** Wait until every projection of `prefix` has an active generation at the events stream's last sequence. */
export async function projectionsCaughtUp(nats: NatsHandle, redis: RedisHandle, prefix: string, timeoutMs: number): Promise<void> {
  const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = (await nats.jsm.streams.info(batonStreamNames(prefix).events)).state.last_seq;
    const statuses = await Promise.all(batonProjections().map((p) => store.status(p)));
    if (statuses.every((s) => s.activeGeneration !== null && s.lastSeq === last)) return;
    if (Date.now() > deadline) throw new Error(`projections at ${statuses.map((s) => s.lastSeq).join(',')}, stream at ${last}`);
    await sleep(100);
  }
}

/** Count every notice published on `<prefix>.notice.>` by `<project> <notice_id>` (subscribed and flushed when it resolves). */
export async function countNotices(nats: NatsHandle, prefix: string): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  nats.connection.subscribe(`${prefix}.notice.>`, {
    callback: (_err, msg) => {
      const notice = JSON.parse(decoder.decode(msg.data)) as { project: string; notice_id: string };
      const key = `${notice.project} ${notice.notice_id}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    },
  });
  await nats.connection.flush();
  return seen;
}

/**
 * Keep the notifier's JSON log lines out of the test output, in `lines` (parse them with
 * `JSON.parse`): stdout's and stderr's (where the logger writes errors); `restore` undoes it.
 */
export function captureNotifierLog(): { lines: string[]; restore: () => void } {
  const lines: string[] = [];
  const spies = [process.stdout, process.stderr].map((stream) => {
    const write = stream.write.bind(stream);
    return jest.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk);
      if (text.includes('"service":"notifier"')) {
        lines.push(...text.split('\n').filter(Boolean));
        return true;
      }
      return (write as (chunk: string | Uint8Array, ...rest: unknown[]) => boolean)(chunk, ...rest);
    });
  });
  return { lines, restore: () => spies.forEach((spy) => spy.mockRestore()) };
}
