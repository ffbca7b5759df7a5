/**
 * Idempotency keys scoped by who used them. An aggregate remembers each recent key with the
 * command and the actor that stored it (read from its events), and a command counts as a retry
 * only when the same command from the same actor brought that key: nobody spends another caller's
 * key. One mechanism for every aggregate that remembers keys (handoffs, project control).
 */

/**
 * One remembered key. `actor` / `actor_kind` are undefined when the event does not tell them:
 * then the command is one only one principal may send, and any caller of it matches.
 */
export interface ScopedKey<C extends string, K extends string = string> {
  key: string;
  command: C;
  actor: string | undefined;
  actor_kind: K | undefined;
}

/** `keys` with `entry` appended (oldest first), unless the same scoped key is already there; at most `limit` kept. */
export function rememberScopedKey<C extends string, K extends string>(
  keys: readonly ScopedKey<C, K>[],
  entry: ScopedKey<C, K>,
  limit: number,
): readonly ScopedKey<C, K>[] {
  if (keys.some((k) => k.key === entry.key && k.command === entry.command && k.actor === entry.actor && k.actor_kind === entry.actor_kind)) return keys;
  const next = [...keys, entry];
  return next.length > limit ? next.slice(next.length - limit) : next;
}

/** Is a command of type `command` from `actor` (of kind `actorKind`) with `key` a retry of one in `keys`? */
export function isScopedRetry<C extends string, K extends string>(
  keys: readonly ScopedKey<C, K>[],
  key: string,
  command: C,
  actor: string,
  actorKind: K | undefined,
): boolean {
  return keys.some(
    (k) => k.key === key && k.command === command && (k.actor === undefined || k.actor === actor) && (k.actor_kind === undefined || k.actor_kind === actorKind),
  );
}
