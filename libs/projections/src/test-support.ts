// Helpers shared by this library's integration tests. Not exported from the library.
import { randomBytes } from 'node:crypto';
import type { EventEnvelope } from '@baton/contracts';
import { Op, type ProjectionOp } from './ops';
import { createRedis, type RedisHandle } from './redis';
import { createProjectionStore, type ProjectionDefinition, type ProjectionStore, type SequencedEvent } from './store';

export interface RedisFixture {
  handle: RedisHandle;
  prefix: string;
  store: ProjectionStore;
  /** Delete every key under the prefix, then close the client. */
  cleanup(): Promise<void>;
}

/** A client and a projection store under a random key prefix of their own. */
export async function redisFixture(): Promise<RedisFixture> {
  const handle = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  await handle.ping();
  const prefix = `test:proj-${randomBytes(6).toString('hex')}`;
  const store = createProjectionStore({ redis: handle.client, prefix, batchEvents: 50, rebuildChunkEvents: 50 });
  return {
    handle,
    prefix,
    store,
    async cleanup() {
      // A swapped rebuild deletes its previous generation in the background (its `cleanup` promise,
      // which a test need not await), and that deletion writes the generation's shared drop count:
      // delete again until a pass finds nothing, so no key of the test outlives it.
      for (let pass = 0; pass < 20; pass++) {
        let deleted = 0;
        for await (const batch of handle.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
          const keys = batch as string[];
          if (keys.length > 0) deleted += await handle.client.unlink(...keys);
        }
        if (deleted === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await handle.close();
    },
  };
}

export type TaskPayload =
  | { title: string; agent: string; why?: string; urgency: number; at: number }
  | { title: string }
  | { tag: string }
  | { reason: string }
  | Record<string, never>;

/** An envelope for the test projection's events. */
export function taskEvent(seq: number, type: string, taskId: string, payload: TaskPayload, project = 'alpha'): SequencedEvent<EventEnvelope<TaskPayload>> {
  return {
    seq,
    id: `ev-${seq}`,
    type,
    version: 1,
    aggregate: { kind: 'handoff', id: taskId },
    project,
    occurredAt: new Date(1_700_000_000_000 + seq * 1000).toISOString(),
    actor: 'tester',
    origin: 'agent',
    causationId: null,
    correlationId: `corr-${taskId}`,
    payload,
  };
}

/**
 * The test projection: every structure the engine offers, driven by task.* events.
 * `task.broken` emits a valid write followed by a zadd on a hash, which must fail as a whole.
 */
export function taskProjection(name = 'tasks', version = 1): ProjectionDefinition<EventEnvelope<TaskPayload>> {
  return {
    name,
    version,
    handles: (type) => type.startsWith('task.'),
    apply(event): ProjectionOp[] {
      const id = event.aggregate.id;
      const p = event.payload as Record<string, unknown>;
      switch (event.type) {
        case 'task.opened':
          return [
            Op.hset(`task:${id}`, { title: String(p['title']), project: event.project, status: 'open' }),
            Op.jsonSet(`task:${id}:doc`, { id, title: String(p['title']), opened_seq: event.seq, agent: String(p['agent']) }),
            Op.zadd('tasks:by-time', Number(p['at']), id),
            Op.sadd(`project:${event.project}:tasks`, id),
            Op.set(`task:${id}:last`, event.id),
            Op.itemUpsert('inbox', {
              id,
              project: event.project,
              kind: 'task',
              agent: String(p['agent']),
              ...(p['why'] ? { why: String(p['why']) } : {}),
              status: 'open',
              urgency: Number(p['urgency']),
              at: Number(p['at']),
              title: String(p['title']),
            }),
          ];
        case 'task.renamed':
          return [
            Op.hset(`task:${id}`, { title: String(p['title']) }),
            Op.itemPatch('inbox', id, { title: String(p['title']) }),
            Op.set(`task:${id}:last`, event.id),
          ];
        case 'task.tagged':
          return [Op.sadd(`task:${id}:tags`, String(p['tag']))];
        case 'task.closed':
          return [
            Op.hset(`task:${id}`, { status: 'closed' }),
            Op.hdel(`task:${id}`, 'project'),
            Op.srem(`project:${event.project}:tasks`, id),
            Op.zrem('tasks:by-time', id),
            Op.itemPatch('inbox', id, { status: 'closed' }, ['why']),
          ];
        case 'task.removed':
          return [Op.del(`task:${id}`), Op.del(`task:${id}:doc`), Op.del(`task:${id}:tags`), Op.itemRemove('inbox', id)];
        case 'task.broken':
          return [Op.set(`broken:${id}`, 'written?'), Op.hset(`task:${id}`, { touched: 'yes' }), Op.zadd(`task:${id}`, 1, 'x')];
        default:
          return [];
      }
    },
  };
}

/** A deterministic event log touching every op: `count` events over `tasks` tasks. */
export function taskLog(count: number, tasks = 12, firstSeq = 1): SequencedEvent<EventEnvelope<TaskPayload>>[] {
  const out: SequencedEvent<EventEnvelope<TaskPayload>>[] = [];
  const opened = new Set<string>();
  for (let i = 0; i < count; i++) {
    const seq = firstSeq + i;
    const id = `t${(i * 7) % tasks}`;
    const project = ['alpha', 'beta'][((i * 7) % tasks) % 2];
    if (!opened.has(id)) {
      opened.add(id);
      out.push(
        taskEvent(
          seq,
          'task.opened',
          id,
          { title: `task ${id}`, agent: `agent-${seq % 3}`, why: seq % 2 ? 'needs_input' : undefined, urgency: seq % 5, at: 1_700_000_000_000 + seq },
          project,
        ),
      );
      continue;
    }
    const kinds = ['task.renamed', 'task.tagged', 'task.closed', 'task.removed', 'other.ignored'];
    const type = kinds[seq % kinds.length];
    if (type === 'task.removed') opened.delete(id);
    const payload: TaskPayload = type === 'task.renamed' ? { title: `renamed ${seq}` } : type === 'task.tagged' ? { tag: `tag-${seq % 4}` } : {};
    out.push(taskEvent(seq, type, id, payload, project));
  }
  return out;
}
