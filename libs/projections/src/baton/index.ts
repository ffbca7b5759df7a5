/**
 * Baton's projection definitions over its run and handoff events (the operator inbox, stop
 * packets, handoff and run views), the projector that applies and rebuilds them, the read side
 * the notifier's API and the CLI share, and a JetStream replay source for rebuilds.
 */
export { InboxKind, InboxStatus, UrgencyByPriority, type TimelineEntry } from './common';
export { FoldSession, applyLive, type AnyFoldingProjection, type FoldingProjection, type FoldStep } from './fold';
export { inboxProjection, InboxItemId, INBOX_STORE, type InboxItem } from './inbox';
export { stopsProjection, stopPacketOf, stopPriority, STOPS_STORE, StopKeys, type StopItem } from './stops';
export { handoffsProjection, HandoffKeys, summarizeHandoffEvent } from './handoffs';
export { runsProjection, RunKeys, summarizeRunEvent, toRunView, type RunView } from './runs';
export {
  batonProjections,
  createBatonProjector,
  type BatonProjector,
  type BatonProjectorOptions,
  type EnsureCurrentResult,
  type RebuildReason,
} from './projector';
export { createBatonViews, type BatonViews, type InboxQuery, type StopQuery, type StopRecord } from './views';
export { jetStreamReplaySource, type JetStreamReplayOptions } from './replay';
