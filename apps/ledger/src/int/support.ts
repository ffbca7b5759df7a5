// Shared set-up for the ledger's integration tests: real NATS, a random
// subject prefix per suite, ledger instances booted in-process, and cleanup of every stream.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { Principals, createEventRegistry, type OperatorRole, type ProjectDefinition } from '@baton/contracts';
import { DlqHeader, JetStreamEventStore, batonStreamNames, connectNats, type LedgerCallOptions, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { claimRateBucket } from '../governance/claim-rate-store';
import { startLedger } from '../ledger';
import type { LedgerOptions } from '../ledger.module';

export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

export function randomPrefix(): string {
  return `tl${randomBytes(5).toString('hex')}`;
}

export async function connectTest(name = 'ledger-int'): Promise<NatsHandle> {
  return connectNats({ servers: NATS_URL, name, reconnect: false });
}

/** Boot one ledger instance in-process on `prefix` (HTTP on a free port, quiet logs). */
export function bootLedger(prefix: string, instance: string, env: Record<string, string> = {}, options: LedgerOptions = {}): Promise<RunningService> {
  return startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: instance, HTTP_PORT: '0', LOG_LEVEL: 'error', ...env }, options);
}

/** The stream behind the claim-rate KV bucket of `prefix` (it exists only when a ledger ran with a cap). */
export function claimRateStream(prefix: string): string {
  return `KV_${claimRateBucket(prefix)}`;
}

/** Delete the three streams of `prefix` (their consumers go with them) and its claim-rate bucket. */
export async function deleteStreams(handle: NatsHandle, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const name of [names.events, names.inbox, names.dlq, claimRateStream(prefix)]) await handle.jsm.streams.delete(name).catch(() => undefined);
}

/** Publish a project definition as the router would (aggregate `definition` / `current`). */
export async function publishDefinition(handle: NatsHandle, prefix: string, definition: ProjectDefinition): Promise<void> {
  const store = new JetStreamEventStore({ js: handle.js, jsm: handle.jsm, prefix, registry: createEventRegistry() });
  const ref = { project: definition.project, kind: 'definition' as const, id: 'current' };
  const { lastSeq } = await store.read(ref);
  const now = new Date().toISOString();
  await store.append(
    ref,
    [
      {
        id: `def-${randomBytes(6).toString('hex')}`,
        type: 'definition.published',
        version: 1,
        aggregate: { kind: 'definition', id: 'current' },
        project: definition.project,
        occurredAt: now,
        actor: 'test-router',
        origin: 'operator',
        causationId: null,
        correlationId: 'test',
        payload: { definition, published_by: 'test-router', published_at: now, digest: randomBytes(8).toString('hex') },
      },
    ],
    { expectedVersion: lastSeq },
  );
}

export interface StoredMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  json(): unknown;
  header(name: string): string | undefined;
}

/** Every message of a stream on `subject` (exact), oldest first. */
export async function messagesOn(handle: NatsHandle, stream: string, subject: string): Promise<StoredMessage[]> {
  const info = await handle.jsm.streams.info(stream);
  const out: StoredMessage[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const msg = await handle.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (!msg || msg.subject !== subject) continue;
    out.push({
      subject: msg.subject,
      seq: msg.seq,
      data: msg.data,
      json: () => JSON.parse(new TextDecoder().decode(msg.data)),
      header: (name) => msg.header?.get(name) || undefined,
    });
  }
  return out;
}

/** Dead letters recorded by `source` (`<prefix>.dlq.<source>`). */
export function deadLetters(handle: NatsHandle, prefix: string, source: string): Promise<StoredMessage[]> {
  return messagesOn(handle, batonStreamNames(prefix).dlq, `${prefix}.dlq.${source}`);
}

/** Offers published for `agent` in `project`. */
export function offers(handle: NatsHandle, prefix: string, project: string, agent: string): Promise<StoredMessage[]> {
  return messagesOn(handle, batonStreamNames(prefix).inbox, `${prefix}.in.${project}.offer.${agent}`);
}

export { DlqHeader };

/**
 * Call options that speak as one principal (the subject names it; the ledger derives the actor):
 * an agent of a project, an operator relayed by the notifier (name and token role), the admin CLI,
 * the router or the watchdog.
 */
export const callers = {
  agent: (project: string, agent: string): LedgerCallOptions => ({ as: Principals.agent(project, agent) }),
  operator: (name: string, role: OperatorRole = 'operator'): LedgerCallOptions => ({ as: Principals.operator('notifier'), operator: { name, role } }),
  admin: (name?: string): LedgerCallOptions => ({ as: Principals.operator('admin'), ...(name !== undefined ? { operator: { name } } : {}) }),
  router: { as: Principals.service('router') } as LedgerCallOptions,
  watchdog: { as: Principals.service('watchdog') } as LedgerCallOptions,
};

/** Call options of the agents of `project`: `as('bob')`. */
export function agentsOf(project: string): (agent: string) => LedgerCallOptions {
  return (agent) => callers.agent(project, agent);
}
