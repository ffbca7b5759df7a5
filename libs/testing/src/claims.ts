import type { NatsHandle } from '@baton/eventstore';
import { createBatonClient, type BatonAgent } from '@baton/sdk';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Ledger refusals that may pass: the handoff is not created yet, or the ledger is away or failing. */
const RETRIED_KINDS = new Set(['not_found', 'unavailable', 'internal']);

/**
 * Simulated agents for the suites and the bench that publish agent results by hand: a result is
 * accepted only under the claim its agent holds on the run's current handoff (docs/runs.md), so
 * each agent claims the handoff first, through the ledger, as an SDK client of its own (sharing
 * one connection). `claim` is idempotent per (handoff, agent): a retry gets the same claim.
 */
export class AgentClaims {
  private readonly clients = new Map<string, Promise<BatonAgent>>();

  constructor(
    /** The connection every agent shares, or each agent's own (an authenticated server: its credentials). */
    private readonly nats: NatsHandle | ((agent: string) => NatsHandle),
    private readonly prefix: string,
    private readonly project: string,
    /** The lease to ask for (default: the ledger's); suites that kill services ask for a long one. */
    private readonly leaseMs?: number,
  ) {}

  /**
   * Claim `handoffId` as `agent` and resolve the claim id. The ledger creates the handoff once the
   * router's dispatch reactor asked for it, so `not_found` (and an unreachable or failing ledger,
   * or a request that timed out) is retried for up to `timeoutMs`; any other refusal rejects.
   */
  async claim(agent: string, handoffId: string, timeoutMs = 30_000): Promise<string> {
    const client = await this.client(agent);
    const until = Date.now() + timeoutMs;
    for (;;) {
      let retry: string;
      try {
        const reply = await client.ledger.claim(this.project, {
          handoff_id: handoffId,
          idempotency_key: `claim-${handoffId}-${agent}`.slice(0, 200),
          ...(this.leaseMs !== undefined ? { lease_ms: this.leaseMs } : {}),
        });
        if (reply.ok && reply.handoff.status === 'claimed' && reply.handoff.claimed_by === agent && reply.handoff.claim_id !== undefined)
          return reply.handoff.claim_id;
        if (reply.ok)
          throw new Error(
            `${agent} cannot claim ${handoffId}: it is ${reply.handoff.status}${reply.handoff.claimed_by ? ` (claimed by ${reply.handoff.claimed_by})` : ''}`,
          );
        if (!RETRIED_KINDS.has(reply.error.kind) && reply.error.code !== 'not_found')
          throw new Error(`${agent} cannot claim ${handoffId}: ${reply.error.code}: ${reply.error.message}`);
        retry = `${reply.error.code}: ${reply.error.message}`;
      } catch (error) {
        if (error instanceof Error && error.message.startsWith(`${agent} cannot claim`)) throw error;
        retry = String(error);
      }
      if (Date.now() > until) throw new Error(`${agent} could not claim ${handoffId} within ${timeoutMs} ms (${retry})`);
      await sleep(20);
    }
  }

  async close(): Promise<void> {
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(clients.map(async (c) => (await c).close()));
  }

  private client(agent: string): Promise<BatonAgent> {
    let client = this.clients.get(agent);
    if (client === undefined) {
      const nats = typeof this.nats === 'function' ? this.nats(agent) : this.nats;
      client = createBatonClient({ nats, prefix: this.prefix, project: this.project, agent });
      this.clients.set(agent, client);
    }
    return client;
  }
}
