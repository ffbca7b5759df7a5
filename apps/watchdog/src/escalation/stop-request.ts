import { Subjects } from '@baton/contracts';
import { createHash } from 'node:crypto';

/** The stop request the router consumes (schema in libs/contracts/src/run-requests.ts). */
export { StopRunRequestSchema, type StopRunRequest } from '@baton/contracts';

/** Where a stop request is published (JetStream, the inbox stream `<PREFIX>_INBOX`). */
export function stopRequestSubject(prefix: string, project: string): string {
  return Subjects.stopRequest(prefix, project);
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
