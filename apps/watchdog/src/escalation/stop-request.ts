import { createHash } from 'node:crypto';

/*
 * The stop request the router consumes. Its schema lives with the router's other inputs in
 * libs/contracts/src/run-requests.ts.
 * TODO(lead): once `libs/contracts/src/index.ts` exports `./run-requests` (and `Subjects` has a
 * builder for `<prefix>.in.<project>.stop`), import both from `@baton/contracts` and drop the
 * lint exception below.
 */
// eslint-disable-next-line @nx/enforce-module-boundaries
export { StopRunRequestSchema, type StopRunRequest } from '../../../../libs/contracts/src/run-requests';

/** Where a stop request is published (JetStream, the inbox stream `<PREFIX>_INBOX`). */
export function stopRequestSubject(prefix: string, project: string): string {
  return `${prefix}.in.${project}.stop`;
}

/**
 * The stop packet id for the escalation event `eventId`: `wd-stop:<event id>`, or
 * `wd-stop:<sha256>` when that would pass the 128-character id limit. Deterministic, so every
 * redelivery and every watchdog instance asks for the same stop (the run decider applies it once).
 */
export function stopPacketId(eventId: string): string {
  const id = `wd-stop:${eventId}`;
  return id.length <= 128 ? id : `wd-stop:${createHash('sha256').update(eventId).digest('hex')}`;
}
