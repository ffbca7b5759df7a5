/**
 * @baton/projections — the Redis projection engine: idempotent atomic apply with a per-projection
 * sequence guard, keyspace generations with shadow rebuilds and compare-and-set swaps, an indexed
 * item store with cursor paging (operator inbox, stop packets), and canonical snapshots.
 */
export { createRedis, DEFAULT_REDIS_URL, type RedisHandle } from './redis';
export { RedisLock, type RedisLockAttempt, type RedisLockOptions } from './redis-lock';
export { LuaScript } from './lua';
export {
  COMPARE_COMMAND_TIMEOUT_MS,
  createProjectionStore,
  type ApplyResult,
  type ApplyTarget,
  type BatchApplyResult,
  type CleanupResult,
  type ConditionalApplyResult,
  type KeyComparisonOptions,
  type LoadedStates,
  type PreparedEvent,
  type ProjectionDefinition,
  type ProjectionStatus,
  type RestampOutcome,
  type ProjectionStore,
  type ProjectionStoreOptions,
  type RebuildOptions,
  type RebuildResult,
  type ReplaySource,
  type SequencedEvent,
  type SwapResult,
} from './store';
export { Op, ItemOrder, INDEXED_FIELDS, IndexedItemSchema, ProjectionOpSchema, type IndexedField, type IndexedItem, type ProjectionOp } from './ops';
export type { ItemFilters, ItemFilterValue, ItemPage, ItemQuery, ItemStore } from './items';
export type { ProjectionReader } from './reader';
export { diffSnapshots, MAX_SHOWN_MEMBERS, type NamespaceComparison, type ProjectionSnapshot, type SnapshotDifference, type SnapshotValue } from './snapshot';
export { canonicalJson, type JsonValue } from './canonical-json';
export {
  InvalidCursorError,
  ProjectionError,
  ProjectionOpError,
  RebuildAbortedError,
  RebuildIncompleteError,
  RebuildBehindError,
  RedisFullError,
  RedisUnavailableError,
  ShadowLostError,
  ProjectionVersionError,
} from './errors';
export {
  FREEZE_LIMITS,
  MEMBER_FREEZE_MIN,
  REBUILD_LEASE_MS,
  type FoldTarget,
  type FreezeLimits,
  type FrozenLive,
  type FrozenMembers,
  type RebuildInfo,
  type RebuildManyOptions,
  type RebuildProgress,
  type ScratchBuild,
  type ScratchGeneration,
  type ScratchOptions,
  type ScratchPass,
} from './rebuilder';
export * from './baton';
