/**
 * The router's input contracts live in `libs/contracts/src/run-requests.ts` (the CLI and the
 * notifier publish them too).
 *
 * TODO(lead): once `libs/contracts/src/index.ts` exports `./run-requests`, replace this file's
 * body with `export * from '@baton/contracts';` (or import from `@baton/contracts` directly) and
 * drop the lint exception below.
 */
// eslint-disable-next-line @nx/enforce-module-boundaries
export * from '../../../libs/contracts/src/run-requests';
