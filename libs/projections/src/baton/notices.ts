import type { HumanActionNotice } from '@baton/contracts';
import type { JsonValue } from '../canonical-json';
import { Op, type IndexedItem } from '../ops';
import { isoMs, eventMs } from './common';
import { toJson, type FoldingProjection } from './fold';
import { projectRef } from './refs';

export const NOTICES_STORE = 'notices';

/** A human action notice as the `notices` item store holds it (kind = the notice's reason). */
export interface NoticeItem extends IndexedItem {
  notice: HumanActionNotice;
}

/**
 * Keys of the `notices` projection. Notice ids are derived from cause ids (`nt-<letter>-<cause
 * id>`, `nt-mt-<result id>`), which repeat across projects, so a notice is named by its project and
 * id: its item id is the ref `<project>:<notice_id>` (see {@link projectRef}).
 */
export const NoticeKeys = {
  /** The item id of a notice in the `notices` item store. */
  item: (project: string, noticeId: string) => projectRef(project, noticeId),
} as const;

/**
 * The `notices` projection: every human action notice the runs (`run.notice_emitted`) and the
 * handoff meshes (`mesh.notice_emitted`) emitted, indexed by project,
 * reason (`kind`) and agent. Its last applied sequence is also the notifier's publish guard: a
 * notice is published on its subject only while its event is above that sequence, so replays,
 * redeliveries and rebuilds never publish a notice again (see apps/notifier).
 */
export function noticesProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'notices',
    // 2: item ids hold the project as well as the notice id (version 1 keyed items by notice id
    // alone, so two projects' notices of one id overwrote each other).
    version: 2,
    handles: (type) => type === 'run.notice_emitted' || type === 'mesh.notice_emitted',
    stateKeyOf: () => null,
    step(_prior, event) {
      if (event.type !== 'run.notice_emitted' && event.type !== 'mesh.notice_emitted') return { ops: [] };
      // A handoff mesh's stop notice (seed 004) has the same shape as a run's.
      const notice = (event.payload as { notice: HumanActionNotice }).notice;
      const item: NoticeItem = {
        id: NoticeKeys.item(notice.project, notice.notice_id),
        project: notice.project,
        kind: notice.reason,
        ...(notice.agent !== null ? { agent: notice.agent } : {}),
        status: 'emitted',
        urgency: 0,
        at: isoMs(notice.created_at) || eventMs(event),
        workflow_run_id: notice.workflow_run_id,
        recipient: notice.recipient.handle,
        notice,
      };
      return { ops: [Op.itemUpsert(NOTICES_STORE, toJson(item) as IndexedItem)] };
    },
  };
}
