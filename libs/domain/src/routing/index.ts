export { resolveRoute, entryRoute } from './route';
export type { RouteInput } from './route';
export { NoActionReasons, EngineReasons } from './reasons';
export { stepById, entryTarget, forwardEdge, resolveNamedTarget, resolveAgent } from './targets';
export type { Resolved } from './targets';
export * from './conditions';
