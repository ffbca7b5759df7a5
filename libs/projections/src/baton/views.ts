import type { HandoffRecord, HumanActionNotice, StopPacket } from '@baton/contracts';
import type { JsonValue } from '../canonical-json';
import { InvalidCursorError } from '../errors';
import type { ItemFilters, ItemPage } from '../items';
import type { ItemOrder } from '../ops';
import type { ProjectionStore } from '../store';
import { InboxStatus, type TimelineEntry } from './common';
import { HandoffKeys, handoffRecordOfState } from './handoffs';
import { INBOX_STORE, inboxItemView, type InboxItem } from './inbox';
import { NOTICES_STORE, NoticeKeys, type NoticeItem } from './notices';
import { idLookupRange, parseProjectRef, projectsOfLookup, type ProjectRef } from './refs';
import { lastSeqOfState, MAX_VIEW_ROUTES, RunKeys, runViewOfState, type RunView } from './runs';
import { STOPS_STORE, StopKeys, stopPacketOf, type StopItem } from './stops';

export interface InboxQuery {
  filters?: ItemFilters;
  order?: ItemOrder;
  limit?: number;
  cursor?: string | null;
}

export interface StopQuery {
  filters?: ItemFilters;
  /**
   * Only the packets of the workflow runs of this id, in every project the `project` filter
   * allows (each project's run of that id: a workflow_run_id may repeat across projects).
   */
  run?: string;
  limit?: number;
  cursor?: string | null;
  /** Only packets created in this window (epoch ms, both ends included). */
  window?: { since?: number; until?: number };
}

/** A stop packet with its answer and what the answer did, as the API shows it. */
export interface StopRecord {
  stop: StopPacket;
  effect: StopItem['effect'] | null;
  answered_at: string | null;
  /** The handoff mesh the packet belongs to (its answer goes to the mesh); null for a run's packet. */
  mesh_run_id: string | null;
}

/** The kinds of record an id names, each unique only within its project. */
export type ScopedKind = 'run' | 'handoff' | 'stop';

/**
 * Read side of Baton's projections, shared by the notifier's HTTP API and the CLI. Runs, handoffs
 * and stop packets are read by project AND id (an id may exist in several projects);
 * {@link BatonViews.projectsOf} says which projects hold an id, for the id-only conveniences.
 */
export interface BatonViews {
  /** One page of the operator inbox (newest or most urgent first, keyset cursor). */
  inbox(query?: InboxQuery): Promise<ItemPage<InboxItem>>;
  /**
   * How many open inbox items `filters` select, whatever their `status` says (it is `open` here):
   * the inbox's size, not a page's. Counted in Redis on the indexes, over the smaller of the
   * filters' index sets (the open items, for a filter that names several projects).
   */
  inboxOpenCount(filters?: ItemFilters): Promise<number>;
  /** One inbox item by its item id (`stop:<project>:<packet_id>`...). */
  inboxItem(id: string): Promise<InboxItem | null>;
  /** One page of stop packets, newest first. With `run`, only the packets of the runs of that id. */
  stops(query?: StopQuery): Promise<ItemPage<StopRecord>>;
  stop(project: string, packetId: string): Promise<StopRecord | null>;
  handoff(project: string, id: string): Promise<{ handoff: HandoffRecord; timeline: TimelineEntry[] } | null>;
  /** The handoffs a workflow run of `project` created, oldest first (a cross-project one names its own project). */
  runHandoffs(project: string, workflowRunId: string): Promise<ProjectRef[]>;
  run(project: string, id: string): Promise<{ run: RunView; timeline: TimelineEntry[] } | null>;
  /** The projects holding a run, handoff or stop packet of this id, sorted (empty when none does). */
  projectsOf(kind: ScopedKind, id: string): Promise<string[]>;
  /** One human action notice of `project` by its id (what a webhook redelivery sends), or null. */
  notice(project: string, noticeId: string): Promise<HumanActionNotice | null>;
}

const toRecord = (item: StopItem): StopRecord => ({
  stop: stopPacketOf(item),
  effect: item.effect ?? null,
  answered_at: item.answered_at ?? null,
  mesh_run_id: item.mesh_run_id ?? null,
});

function matches(item: StopItem, filters: ItemFilters | undefined): boolean {
  for (const [field, wanted] of Object.entries(filters ?? {})) {
    if (wanted === undefined) continue;
    const values = typeof wanted === 'string' ? [wanted] : wanted;
    if (!values.includes(String(item[field] ?? ''))) return false;
  }
  return true;
}

/** Keyset cursor of the per-run stop listing: `<at>:<id>` of the last item returned. */
/** A cursor of one run's packets: its position, bound to the run it pages. */
function runCursor(item: StopItem, run: string): string {
  return Buffer.from(JSON.stringify({ v: 1, r: [item.at, item.id], u: run }), 'utf8').toString('base64url');
}

function decodeRunCursor(cursor: string, run: string): [number, string] {
  let body: { v?: unknown; r?: unknown; u?: unknown; k?: unknown };
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as typeof body;
  } catch {
    throw new InvalidCursorError('cursor is not a cursor returned by this API');
  }
  const [at, id] = Array.isArray(body?.r) ? body.r : [];
  if (body?.v !== 1 || typeof at !== 'number' || typeof id !== 'string') {
    throw new InvalidCursorError(
      body?.k !== undefined ? 'cursor was made for the listing of every run, not one run' : 'cursor is not a cursor returned by this API',
    );
  }
  // Made before run cursors named their run: taken.
  if (body.u !== undefined && body.u !== run) throw new InvalidCursorError(`cursor was made for run ${String(body.u)}, not ${run}`);
  return [at, id];
}

/** Build the read side over a projection store. Reads always see the active generation. */
export function createBatonViews(store: ProjectionStore): BatonViews {
  const inboxItems = store.items<InboxItem>('inbox', INBOX_STORE);
  const stopItems = store.items<StopItem>('stops', STOPS_STORE);
  const noticeItems = store.items<NoticeItem>('notices', NOTICES_STORE);
  const handoffs = store.reader('handoffs');
  const runs = store.reader('runs');
  const stopsReader = store.reader('stops');
  const timeline = async (reader: typeof handoffs, key: string) => (await reader.zrange(key, 0, -1)).map((raw) => JSON.parse(raw) as TimelineEntry);
  const lookup = async (reader: typeof handoffs, key: string, id: string) => {
    const { min, max } = idLookupRange(id);
    return projectsOfLookup(await reader.zrangeByLex(key, min, max));
  };
  const readers: Record<ScopedKind, typeof handoffs> = { run: runs, handoff: handoffs, stop: stopsReader };

  return {
    async inbox(query = {}) {
      const page = await inboxItems.query(query);
      return { ...page, items: page.items.map(inboxItemView) };
    },
    inboxOpenCount: (filters = {}) => inboxItems.count({ ...filters, status: InboxStatus.open }),
    async notice(project, noticeId) {
      return (await noticeItems.get(NoticeKeys.item(project, noticeId)))?.notice ?? null;
    },
    async inboxItem(id) {
      const item = await inboxItems.get(id);
      return item === null ? null : inboxItemView(item);
    },
    async stops(query = {}) {
      if (query.run === undefined) {
        const page = await stopItems.query({
          filters: query.filters,
          order: 'newest',
          limit: query.limit,
          cursor: query.cursor,
          ...(query.window ? { window: query.window } : {}),
        });
        return { items: page.items.map(toRecord), nextCursor: page.nextCursor };
      }
      // A run has a handful of packets: read them all, filter and page in memory (newest first).
      const limit = query.limit ?? 50;
      const after = query.cursor ? decodeRunCursor(query.cursor, query.run) : null;
      const run = query.run;
      const wanted = query.filters?.project;
      const projects = (await lookup(stopsReader, StopKeys.runIds, run)).filter(
        (project) => wanted === undefined || (typeof wanted === 'string' ? wanted === project : wanted.includes(project)),
      );
      const ids = (await Promise.all(projects.map((project) => stopsReader.zrange(StopKeys.byRun(project, run), 0, -1)))).flat();
      const items = (await Promise.all(ids.map((id) => stopItems.get(id))))
        .filter((item): item is StopItem => item !== null && matches(item, query.filters))
        .sort((a, b) => b.at - a.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .filter((item) => after === null || item.at < after[0] || (item.at === after[0] && item.id > after[1]));
      const page = items.slice(0, limit);
      return { items: page.map(toRecord), nextCursor: items.length > limit ? runCursor(page[page.length - 1] as StopItem, run) : null };
    },
    async stop(project, packetId) {
      const item = await stopItems.get(StopKeys.item(project, packetId));
      return item ? toRecord(item) : null;
    },
    async handoff(project, id) {
      const record = handoffRecordOfState(await handoffs.getJson<JsonValue>(HandoffKeys.state(project, id)));
      if (!record) return null;
      return { handoff: record, timeline: await timeline(handoffs, HandoffKeys.timeline(project, id)) };
    },
    async runHandoffs(project, workflowRunId) {
      const refs = await handoffs.zrange(HandoffKeys.byRun(project, workflowRunId), 0, -1);
      return refs.map(parseProjectRef).filter((ref): ref is ProjectRef => ref !== null);
    },
    async run(project, id) {
      const state = await runs.getJson<JsonValue>(RunKeys.state(project, id));
      const lastSeq = lastSeqOfState(state);
      if (lastSeq === null) return null;
      // The routes up to the state's last event: a route recorded since (after the state was read) is left for the next read.
      const view = runViewOfState(state, await runs.zrangeByScore(RunKeys.routes(project, id), '-inf', lastSeq, MAX_VIEW_ROUTES));
      if (!view) return null;
      return { run: view, timeline: await timeline(runs, RunKeys.timeline(project, id)) };
    },
    projectsOf: (kind, id) => lookup(readers[kind], kind === 'run' ? RunKeys.ids : kind === 'handoff' ? HandoffKeys.ids : StopKeys.ids, id),
  };
}
