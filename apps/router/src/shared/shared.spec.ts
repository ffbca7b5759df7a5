import fc from 'fast-check';
import { AgentResultSchema, Limits } from '@baton/contracts';
import { meshEventIds } from '../meshes/mesh-commands';
import { eventIdsFor, type CauseKind } from './ids';
import { decodeInbound } from './inbound';
import { subjectTokens } from './subjects';

describe('router edge helpers', () => {
  it('reads the project and agent tokens of inbox and command subjects', () => {
    expect(subjectTokens('baton', 'baton.in.demo.result.issue')).toEqual({ project: 'demo', agent: 'issue' });
    expect(subjectTokens('baton', 'baton.in.demo.start')).toEqual({ project: 'demo', agent: null });
    expect(subjectTokens('baton', 'baton.in.demo.answer')).toEqual({ project: 'demo', agent: null });
    expect(subjectTokens('baton', 'baton.cmd.router.demo.publish_definition')).toEqual({ project: 'demo', agent: null });
    expect(subjectTokens('baton', 'baton.ev.demo.run.x')).toBeNull();
    // Another prefix, an inbox kind nobody reads, a wildcard, an extra token: not the router's.
    expect(subjectTokens('other', 'baton.in.demo.start')).toBeNull();
    expect(subjectTokens('baton', 'baton.in.demo.bogus')).toBeNull();
    expect(subjectTokens('baton', 'baton.in.*.start')).toBeNull();
    expect(subjectTokens('baton', 'baton.in.demo.result.issue.x')).toBeNull();
  });

  it('checks the size cap before anything else: an oversized payload is payload_too_large, not a schema violation', () => {
    const decoded = decodeInbound(JSON.stringify({ pad: 'x'.repeat(Limits.maxMessageBytes) }), AgentResultSchema);
    expect(decoded).toMatchObject({ ok: false, rejection: { code: 'payload_too_large' } });
  });

  it('refuses malformed JSON, prototype keys and schema violations with their codes', () => {
    expect(decodeInbound('{"a":', AgentResultSchema)).toMatchObject({ ok: false, rejection: { code: 'malformed_json' } });
    expect(decodeInbound('{"__proto__": {"x": 1}}', AgentResultSchema)).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
    expect(decodeInbound('{"result_id": "r1"}', AgentResultSchema)).toMatchObject({ ok: false, rejection: { code: 'schema_violation' } });
  });

  it('derives the same event ids for the same cause, within the id length cap', () => {
    const long = 'r'.repeat(Limits.maxIdLength);
    const run = { project: 'demo', kind: 'run', id: 'wr-1' };
    expect(eventIdsFor(run, 'result', 'r1').eventId(0)).toBe(eventIdsFor(run, 'result', 'r1').eventId(0));
    expect(eventIdsFor(run, 'result', 'r1').eventId(0)).toBe('ev0-r-demo:run:wr-1:r1');
    expect(eventIdsFor(run, 'result', 'r1').eventId(0)).not.toBe(eventIdsFor(run, 'result_refused', 'r1').eventId(0));
    expect(eventIdsFor(run, 'result', long).eventId(1).length).toBeLessThanOrEqual(Limits.maxIdLength);
    // The same cause id in another project, or on another run, is another event.
    expect(eventIdsFor({ ...run, project: 'other' }, 'result', 'r1').eventId(0)).not.toBe(eventIdsFor(run, 'result', 'r1').eventId(0));
    expect(eventIdsFor({ ...run, id: 'wr-2' }, 'result', 'r1').eventId(0)).not.toBe(eventIdsFor(run, 'result', 'r1').eventId(0));
    expect(eventIdsFor({ ...run, project: 'other' }, 'result', long).eventId(0)).not.toBe(eventIdsFor(run, 'result', long).eventId(0));
  });

  // The event store asks `eventIndex` whether an aggregate's last event is this command's (a
  // retry to complete): it must name every id `eventId` gives, short or clipped, and nothing else.
  it('reads an event id back to its index, for run and mesh ids, short and clipped, and refuses every other id', () => {
    const kinds: CauseKind[] = ['start', 'result', 'result_refused', 'answer', 'answer_refused', 'stop', 'message', 'message_refused', 'handoff_failed'];
    const idText = fc.string({ minLength: 1, maxLength: Limits.maxIdLength });
    fc.assert(
      fc.property(
        idText,
        idText,
        fc.constantFrom(...kinds),
        fc.constantFrom<'start' | 'turn' | 'answer'>('start', 'turn', 'answer'),
        (runId, causeId, kind, meshKind) => {
          const run = eventIdsFor({ project: 'demo', kind: 'run', id: runId }, kind, causeId);
          const mesh = meshEventIds({ project: 'demo', kind: 'mesh', id: runId }, meshKind, causeId);
          const other = eventIdsFor({ project: 'demo', kind: 'run', id: runId }, kind, `${causeId}x`);
          for (const index of [0, 1, 2, 9, 10, 31]) {
            expect(run.eventIndex(run.eventId(index))).toBe(index);
            expect(mesh.eventIndex(mesh.eventId(index))).toBe(index);
            expect(run.eventIndex(other.eventId(index))).toBeNull();
            expect(run.eventIndex(mesh.eventId(index))).toBeNull();
            expect(mesh.eventIndex(run.eventId(index))).toBeNull();
          }
          for (const stranger of [
            '',
            'ev',
            'ev-',
            'ev01-r-x',
            `${run.eventId(1)}x`,
            run.eventId(1).replace('ev1', 'ev01'),
            'evx-r-demo',
            '550e8400-e29b-41d4-a716-446655440000',
          ])
            expect(run.eventIndex(stranger)).toBeNull();
        },
      ),
      { numRuns: 300 },
    );
  });
});
