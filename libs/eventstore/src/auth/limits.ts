import { Limits, type Principal } from '@baton/contracts';

/**
 * The limits a user JWT carries that nats-server enforces on the connection (NATS JWT v2 `payload`
 * and `subs`; -1: none). `payload` is checked against each message the client publishes, headers
 * and body together: past it the server answers `-ERR 'Maximum Payload Violation'` and closes the
 * connection, and a client that reads the server's INFO (nats.js and the other official clients: the
 * server sends the user's limit as `max_payload` once the connection is up) refuses such a publish
 * itself (`MAX_PAYLOAD_EXCEEDED`). `subs` is the most subscriptions the connection may hold: one
 * more is refused (`-ERR 'Maximum Subscriptions Exceeded'`). The JWT's `data` limit is not
 * enforced by nats-server 2.9 and stays -1.
 */
export interface UserLimits {
  payload: number;
  subs: number;
}

/** Room for a message's headers beside the largest body Baton takes (`Nats-Msg-Id`, trace context, …). */
export const AGENT_HEADER_ALLOWANCE_BYTES = 16 * 1024;

/**
 * An agent's limits unless `baton creds agent` is told otherwise: a message no larger than the
 * largest body any entry point takes (`Limits.maxMessageBytes`, 256 KiB) plus its headers, so what
 * the edge would refuse `payload_too_large` anyway is refused by the server before it costs a relay
 * a read; and subscriptions enough for every client Baton ships (the SDK holds a handful).
 */
export const AGENT_USER_LIMITS: Readonly<UserLimits> = { payload: Limits.maxMessageBytes + AGENT_HEADER_ALLOWANCE_BYTES, subs: 1_000 };

/** No limit: the services and the admin (a service's dead letter carries another's whole message and its headers). */
export const UNLIMITED_USER: Readonly<UserLimits> = { payload: -1, subs: -1 };

/**
 * The limits a principal's user JWT carries: an agent's are {@link AGENT_USER_LIMITS} with the
 * `given` ones over them; services and the admin are not limited (`given` is for agents only).
 */
export function userLimitsFor(principal: Principal, given: Partial<UserLimits> = {}): UserLimits {
  if (principal.kind !== 'agent') return { ...UNLIMITED_USER };
  return { payload: given.payload ?? AGENT_USER_LIMITS.payload, subs: given.subs ?? AGENT_USER_LIMITS.subs };
}
