/** Subject tokens may not hold separators or wildcards. */
export function isSubjectToken(value: string): boolean {
  return value.length > 0 && !/[\s.*>]/.test(value);
}

/**
 * A subject one may publish on: subject tokens only (no wildcard, no empty token, no white space).
 * A reply subject must be one: nats-server 2.9.10 crashed (a stack overflow) answering a JetStream
 * API call whose reply subject held a wildcard, and an empty token names nothing.
 */
export function isPlainSubject(subject: string): boolean {
  return subject.split('.').every(isSubjectToken);
}

/** Is `subject` strictly under `prefix` (`<prefix>.` and at least one more token)? */
export function isUnder(subject: string, prefix: string): boolean {
  return subject.length > prefix.length + 1 && subject.startsWith(`${prefix}.`);
}
