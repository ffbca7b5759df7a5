export { runDecider, decideRun, decisionSignalOf, RunErrorCode } from './decide';
export { evolveRun, initialRunState, openStopId, isFinished } from './state';
export type { RunEvent, RunEventOf, RunState, StartedRunState, RunCore, RunHold, WaitingParent } from './state';
export type { RunCommand, RunCommandMetadata, StartRun, RecordResult, ResumeRun, StopRun, RejectResult } from './commands';
export { deriveId, handoffIdFor, noticeIdFor, stopIdFor } from './ids';
