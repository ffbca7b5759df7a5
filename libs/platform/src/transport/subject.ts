/** Pattern matching and derived durable names live with the consumer runner (`@baton/eventstore`). */
export { durableNameFor, subjectMatches } from '@baton/eventstore';

/** Replace the `{prefix}` placeholder in a pattern written in a decorator. */
export function resolvePattern(pattern: string, prefix: string): string {
  return pattern.split('{prefix}').join(prefix);
}
