export {
  decideProjectControl,
  evolveProjectControl,
  initialProjectControlState,
  projectControlDecider,
  ProjectControlErrorCode,
  PROJECT_RECENT_KEYS_LIMIT,
  toProjectControlRecord,
  type PauseProject,
  type ProjectControlCommand,
  type ProjectControlState,
  type ResumeProject,
} from './project-control';
export { isUnknownProject, projectSummaryOf, type SummarizedEvent } from './summary';
