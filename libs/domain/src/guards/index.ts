export {
  DefaultGuardConfig,
  guardFactOf,
  HopCapName,
  type AnsweredClaim,
  type GuardConfig,
  type GuardEventInput,
  type GuardFact,
  type GuardStop,
} from './facts';
export { edgeOf, initialRunGuard, stepRunGuard, type EdgeCount, type RunGuardFact, type RunGuardState, type RunGuardStep } from './run-guard';
export { initialCircuit, stepCircuit, type CircuitInput, type CircuitState, type CircuitStep } from './circuit';
