// Handoff meshes (seed 004): the mesh run aggregate (decide / evolve) and the mesh build checks.
export { buildMesh, resolveHandoffCall, toolTables } from './build';
export type { CompiledMesh, HandoffCallResolution, MeshBuild } from './build';
export type { MeshCommand, MeshCommandMetadata, RecordMeshTurn, StartMesh } from './commands';
export { decideMesh, meshDecider, meshEntryHandoffId, MeshErrorCode, meshHandoffId, meshStopId } from './decide';
export { evolveMesh, initialMeshState, isOutputAgent } from './state';
export type { MeshEvent, MeshRunState, MeshState, MeshTurn } from './state';
