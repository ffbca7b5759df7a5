/**
 * Baton's projection definitions over its run and handoff events (the operator inbox, stop
 * packets, handoff and run views), the projector that applies and rebuilds them, the read side
 * the notifier's API and the CLI share, and a JetStream replay source for rebuilds.
 */
export { InboxKind, InboxStatus, InboxWhys, UrgencyByPriority, eventMs, isoMs, timelineEntryOf, type TimelineEntry } from './common';
export { storedTimelineEntry } from './stored-timeline';
export { FoldSession, applyLive, type AnyFoldingProjection, type FoldingProjection, type FoldStep } from './fold';
export { inboxProjection, InboxItemId, INBOX_STORE, type InboxItem } from './inbox';
export { stopsProjection, stopPacketOf, stopPriority, STOPS_STORE, StopKeys, type StopItem } from './stops';
export { handoffsProjection, HandoffKeys, handoffRecordOfState, summarizeHandoffEvent, OPEN_HANDOFF_STATUSES, type OpenHandoffStatus } from './handoffs';
export {
  appendRoute,
  MAX_VIEW_ROUTES,
  routeOf,
  runsProjection,
  RunKeys,
  runViewOf,
  runViewOfState,
  lastSeqOfState,
  summarizeRunEvent,
  toRunView,
  type RunRoute,
  type RunView,
  type RunWaitingParent,
} from './runs';
export {
  batonProjections,
  type ApplyHooks,
  createBatonProjector,
  type BatonProjector,
  type BatonProjectorOptions,
  type EnsureCurrentOptions,
  type EnsureCurrentResult,
  type EventsStreamMark,
  newerRelease,
  type NewerRelease,
  type RebuildReason,
} from './projector';
export { noticesProjection, NoticeKeys, NOTICES_STORE, type NoticeItem } from './notices';
export {
  foldScenario,
  scenarioEnvelope,
  scenarioLog,
  scenarioSequenced,
  scenarioSteps,
  ScenarioProject,
  type ScenarioEvent,
  type ScenarioOptions,
  type ScenarioStep,
} from './scenario';
export { createBatonViews, type BatonViews, type InboxQuery, type ScopedKind, type StopQuery, type StopRecord } from './views';
export { projectRef, parseProjectRef, idLookupMember, idLookupRange, type ProjectRef } from './refs';
export {
  PROJECTION_DURABLE,
  eventsStreamMark,
  jetStreamReplaySource,
  noticesPublishedThrough,
  restampEventsStream,
  type JetStreamReplayOptions,
} from './replay';
export { RangeFold, ProjectionGapError, ProjectionLostError, type EventRange, type RangeHooks, type RangeApplyResult } from './range';
