import fc from 'fast-check';
import { AgentResultSchema, decodeInbound, Limits, StartRunRequestSchema, StopRunRequestSchema } from '@baton/contracts';
import { PoisonError } from '@baton/eventstore';
import { meshEventIds } from '../meshes/mesh-commands';
import { meshSubjectTokens } from '../meshes/mesh-subjects';
import { eventIdsFor, type CauseKind } from './ids';
import { decodeForSubject, decodeOrPoison } from './inbound';
import { subjectTokens } from './subjects';

describe('router edge helpers', () => {
  it('a start with nobody to notify is dead-lettered no_notice_recipient (the documented code), not schema_violation', () => {
    const bytes = new TextEncoder().encode(JSON.stringify({ workflow_run_id: 'wr-1', project: 'acme', workflow: 'dev' }));
    let thrown: unknown;
    try {
      decodeOrPoison(bytes, StartRunRequestSchema);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(PoisonError);
    expect((thrown as PoisonError).reason).toBe('no_notice_recipient');
    // Other schema failures keep the general code.
    expect(() => decodeOrPoison(new TextEncoder().encode('{"project":"acme"}'), StartRunRequestSchema)).toThrow(
      expect.objectContaining({ reason: 'schema_violation' }),
    );
  });

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

  // Identity comes from the subject: every inbox use case decodes through decodeForSubject, which
  // holds the body's project (and, on an agent's subject, its agent) to what the subject names.
  it("decodeForSubject: the body must name the project and agent of its subject; another project is poison project_mismatch, another agent identity_mismatch (the ledger's codes)", () => {
    const bytes = (body: object) => new TextEncoder().encode(JSON.stringify(body));
    const stop = { packet_id: 'p1', workflow_run_id: 'wr-1', project: 'demo', why: 'guard_failed', requested_by: 'ops' };
    const reason = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return { reason: (error as { reason?: string }).reason, message: (error as Error).message };
      }
      return null;
    };
    expect(decodeForSubject('baton', 'baton.in.demo.stop', bytes(stop), StopRunRequestSchema)).toMatchObject({ project: 'demo' });
    expect(reason(() => decodeForSubject('baton', 'baton.in.other.stop', bytes(stop), StopRunRequestSchema))).toEqual({
      reason: 'project_mismatch',
      message: "project_mismatch: the subject names project 'other', the body 'demo'",
    });
    // A subject that carries no identity (not an inbox subject of this prefix) is refused too.
    expect(reason(() => decodeForSubject('baton', 'elsewhere.in.demo.stop', bytes(stop), StopRunRequestSchema))?.reason).toBe('project_mismatch');
    // On an agent's subject the agent is checked as well: a result cannot speak for another agent.
    const result = {
      result_id: 'wr-1-r1',
      run_id: 'ar-wr-1-1',
      project: 'demo',
      workflow_run_id: 'wr-1',
      agent: 'ping',
      body: 'Step done.',
      decision: { dispatch: { status: 'advance' } },
      produced_at: '2026-12-03T06:00:00.000Z',
    };
    expect(decodeForSubject('baton', `baton.in.demo.result.${result.agent}`, bytes(result), AgentResultSchema)).toMatchObject({ agent: result.agent });
    expect(reason(() => decodeForSubject('baton', 'baton.in.demo.result.mallory', bytes(result), AgentResultSchema))).toEqual({
      reason: 'identity_mismatch',
      message: `identity_mismatch: the subject names agent 'mallory', the body '${result.agent}'`,
    });
    // The mesh inbox reads its own subjects: a run-inbox subject is no mesh identity.
    expect(decodeForSubject('baton', `baton.in.demo.mesh_result.${result.agent}`, bytes(result), AgentResultSchema, meshSubjectTokens)).toMatchObject({
      project: 'demo',
    });
    expect(reason(() => decodeForSubject('baton', `baton.in.demo.result.${result.agent}`, bytes(result), AgentResultSchema, meshSubjectTokens))?.reason).toBe(
      'project_mismatch',
    );
  });
});
