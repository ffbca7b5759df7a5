import type { JetStreamClient, NatsConnection } from 'nats';

/*
 * Sizing pulls by bytes with a count. The nats.js consumer API takes a pull's `max_messages` or
 * its `max_bytes`, not both, and a pull bounded by bytes never delivers a message larger than
 * what it asked for (a consumer refilling "the bytes left" stalls on the next large message:
 * measured on nats-server 2.9.10). So readers ask for a count: no more messages than fit in the
 * bytes they may hold, at the size of the largest message of their previous pull.
 */

/** The connection a JetStream client speaks over (the client keeps it as `nc`). */
export function connectionOf(js: JetStreamClient): NatsConnection {
  const nc = (js as unknown as { nc?: NatsConnection }).nc;
  if (nc === undefined) throw new Error('this JetStream client does not expose its connection');
  return nc;
}

/** The largest message the server accepts (`max_payload` of the connection behind `js`), else NATS's default of 1 MiB. */
export function maxPayloadOf(js: JetStreamClient): number {
  const payload = (js as unknown as { nc?: { info?: { max_payload?: unknown } } }).nc?.info?.max_payload;
  return typeof payload === 'number' && payload > 0 ? payload : 1024 * 1024;
}

/**
 * How many messages a pull may ask for: at most `free`, and no more than fit in `room` bytes at
 * `largest` bytes each (at least one, so a runner always makes progress).
 */
export function pullCount(free: number, room: number, largest: number): number {
  if (free <= 0) return 0;
  if (largest <= 0 || free * largest <= room) return free;
  return Math.max(1, Math.min(free, Math.floor(room / largest)));
}
