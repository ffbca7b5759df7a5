import fc from 'fast-check';
import { OperatorAnswer, RESERVED_NAMES, StopPacketSchema, StopWhySchema } from '@baton/contracts';
import { buildStop, StopFacts, TriedEntry } from './build-stop';
import { pendingDigest } from './pending';
import { decideResume } from './resume';

/** Names the contracts refuse (RESERVED_NAMES); fast-check proposes them on purpose. */
const notReserved = (name: string) => !(RESERVED_NAMES as readonly string[]).includes(name);

const id = fc.stringMatching(/^[A-Za-z0-9_\-:@]{1,40}$/);
const project = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,20}$/);
const agentName = fc.stringMatching(/^[A-Za-z0-9_-]{1,30}$/).filter(notReserved);
/** Text a model or an agent might produce, leaning on the words that must never reach a user. */
const hostileText = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.constantFrom(
    'crash',
    'CRASHED',
    'Error: boom',
    '    at refund (agent.js:10:3)',
    'Traceback (most recent call last)',
    'stack overflow',
    'I think I should refund',
  ),
);
const tried: fc.Arbitrary<TriedEntry[]> = fc.array(
  fc.oneof(
    hostileText,
    fc.record({ name: fc.string({ minLength: 1, maxLength: 40 }), trace_id: fc.option(id, { nil: undefined }) }, { requiredKeys: ['name'] }),
  ),
  { maxLength: 12 },
);
const pending = fc.option(
  fc.record(
    {
      name: fc.string({ minLength: 1, maxLength: 40 }),
      // Keys that name prototypes never get this far: every entry point decodes with
      // parseUntrustedJson, which refuses them (libs/contracts/src/registry.spec.ts).
      args: fc.dictionary(
        fc.string({ maxLength: 12 }).filter((k) => !['__proto__', 'constructor', 'prototype'].includes(k)),
        fc.jsonValue({ maxDepth: 3 }),
        { maxKeys: 6 },
      ),
      call_id: id,
    },
    { requiredKeys: ['name', 'args'] },
  ),
  { nil: undefined, freq: 3 },
);
const now = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());

const facts: fc.Arbitrary<StopFacts> = fc.record(
  {
    packet_id: id,
    now,
    why: fc.constantFrom(...StopWhySchema.options),
    tried,
    trace_ids: fc.array(id, { maxLength: 5 }),
    pending: fc.oneof(pending, fc.constant(null)),
    run_id: id,
    workflow_run_id: id,
    project,
    agent: agentName,
    step: fc.string({ minLength: 1, maxLength: 40 }),
    detail: hostileText,
    cap: fc.record({ name: fc.constantFrom('steps', 'tool_calls', 'tokens'), limit: fc.nat(1000), used: fc.nat(1000) }, { requiredKeys: ['name', 'limit'] }),
    intents: fc.array(fc.stringMatching(/^[a-z]{1,12}$/), { maxLength: 4 }),
  },
  { requiredKeys: ['packet_id', 'now', 'why', 'tried', 'run_id', 'workflow_run_id', 'project', 'agent', 'step'] },
);

describe('stop packet properties (fast-check)', () => {
  it('for arbitrary facts, the user message never says crash, shows no stack and no error text, and the packet round-trips through StopPacketSchema', () => {
    fc.assert(
      fc.property(facts, (f) => {
        const { packet, userMessage } = buildStop(f);
        expect(userMessage).not.toMatch(/crash|stack|Error:|at .*\(/i);
        const parsed = StopPacketSchema.parse(packet);
        expect(parsed).toEqual(packet);
        // "A packet is JSON you can store": it survives a trip through JSON text unchanged.
        const stored = StopPacketSchema.parse(JSON.parse(JSON.stringify(packet)));
        expect(stored).toEqual(packet);
        expect(stored.pending_digest).toBe(stored.pending ? pendingDigest(stored.pending) : null);
        // Never invent a pending call, never drop a real one.
        expect(packet.pending === null).toBe(f.pending === null || f.pending === undefined);
        expect(packet.goal_done).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('the pending digest ignores key order and copying, and changes when any argument changes', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 20 }),
        fc.uniqueArray(fc.stringMatching(/^[a-z]{1,8}$/), { minLength: 1, maxLength: 6 }),
        fc.array(fc.integer(), { minLength: 6, maxLength: 6 }),
        (name, keys, values) => {
          const args = Object.fromEntries(keys.map((k, i) => [k, values[i]]));
          const reversed = Object.fromEntries([...keys].reverse().map((k) => [k, args[k]]));
          expect(pendingDigest({ name, args })).toBe(pendingDigest({ name, args: reversed }));
          const changed = { ...args, [keys[0]!]: (args[keys[0]!] as number) + 1 };
          expect(pendingDigest({ name, args: changed })).not.toBe(pendingDigest({ name, args }));
        },
      ),
    );
  });

  it("stale answer refused: any digest other than the frozen call's is refused for every pending packet", () => {
    fc.assert(
      fc.property(facts, fc.string({ minLength: 1, maxLength: 30 }), (f, guess) => {
        const { packet } = buildStop({ ...f, why: 'policy', pending: { name: 'refund', args: { amount: 40, order_id: 99 } } });
        fc.pre(guess !== packet.pending_digest);
        const reply: OperatorAnswer = {
          packet_id: packet.packet_id,
          answer_id: 'ans-1',
          action: 'approve',
          pending_digest: guess,
          answered_by: 'ops@example.com',
          answered_at: packet.created_at,
        };
        const result = decideResume(packet, reply, { now: packet.created_at, actorRole: 'operator' });
        expect(result).toMatchObject({ ok: false, error: { code: 'stale_answer' } });
      }),
      { numRuns: 100 },
    );
  });
});
