export { handoffDecider } from './decider';
export { decideHandoff, handbackRecipient, HandoffErrorCode, LEDGER_DERIVED_HANDOFF_ID, ROUTER_DERIVED_HANDOFF_ID } from './decide';
export {
  evolveHandoff,
  initialHandoffState,
  toHandoffRecord,
  RECENT_KEYS_LIMIT,
  type RecentKey,
  type AbsentHandoff,
  type ArchivedHandoff,
  type Claim,
  type ClaimedHandoff,
  type CompletedHandoff,
  type EndedHandoff,
  type ExistingHandoff,
  type HandoffCore,
  type HandoffState,
  type PendingHandoff,
  type ReturnedHandoff,
} from './state';
export { handoffRun, type HandoffRunFields, type HandoffRunRef } from './run-ref';
export { checkRunPart, evolveRunTurn, RunPartErrorCode, runTurnFold, runWaitsFor, type RunTurn } from './run-turn';
export { applyEvidenceFloor, evidenceFloorApplies, hasEvidence, isMeaningfulEntry, isMeaningfulText } from './evidence';
export {
  escalationPolicy,
  handbackDecisionPolicy,
  handbackPolicy,
  LEDGER_ACTOR,
  reactToHandoffEvent,
  type HandoffReaction,
  type HandoffReactionContext,
} from './policies';
export type {
  AbandonHandoff,
  ArchiveHandoff,
  ClaimHandoff,
  CompleteFromHandback,
  CompleteFromResult,
  CreateHandoff,
  CrossProjectRosters,
  DecideHandback,
  ExpireDeadline,
  FailHandoff,
  HandoffCommand,
  HandoffCommandType,
  HeartbeatHandoff,
  ProjectRoster,
  ReleaseHandoff,
  RequeueExpired,
  ReturnHandoff,
  ReworkFromHandback,
} from './commands';
