// Handoff meshes (seed 004): the mesh run aggregate (decide / evolve) and the mesh build checks.
export { buildMesh, resolveHandoffCall, toolTables } from './build';
export type { CompiledMesh, HandoffCallResolution, MeshBuild } from './build';
export type { AnswerMeshStop, MeshCommand, MeshCommandMetadata, RecordMeshTurn, StartMesh } from './commands';
export {
  decideMesh,
  MESH_ANSWER_AGENT,
  OPERATOR_ANSWER_TOOL,
  meshDecider,
  meshEntryHandoffId,
  MeshErrorCode,
  meshHandoffId,
  meshNoticeId,
  meshNoticeRecipient,
  meshResumeHandoffId,
  meshStopId,
} from './decide';
export { evolveMesh, initialMeshState, isAnswerRefusal, isOutputAgent } from './state';
export type { MeshEvent, MeshRunState, MeshState, MeshTurn } from './state';
export { handoverText, meshViewOf, summarizeMeshEvent, turnCount } from './view';
export type {
  MeshView,
  MeshViewCapRaise,
  MeshViewEvent,
  MeshViewHandoff,
  MeshViewIgnored,
  MeshViewOutcome,
  MeshViewRejected,
  MeshViewStop,
  MeshViewTurn,
} from './view';
