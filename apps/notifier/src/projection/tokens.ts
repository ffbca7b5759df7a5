/** Injection tokens of the notifier's projection providers. */
export const PROJECTION_STORE = Symbol('PROJECTION_STORE');
export const BATON_PROJECTOR = Symbol('BATON_PROJECTOR');
export const BATON_VIEWS = Symbol('BATON_VIEWS');
export const LEDGER_CLIENT = Symbol('LEDGER_CLIENT');

/** The Redis key prefix of the projections of a deployment (`<BATON_PREFIX>:proj`). */
export const projectionPrefix = (batonPrefix: string) => `${batonPrefix}:proj`;

/** The notifier's durable consumer on the events stream (named in `@baton/projections`, which `baton replay` reads too). */
export { PROJECTION_DURABLE } from '@baton/projections';
