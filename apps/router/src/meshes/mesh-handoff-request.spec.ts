import { CreateHandoffCommandSchema, Limits, MeshDefinitionSchema } from '@baton/contracts';
import type { MeshRunState } from '@baton/domain';
import { MESH_CONTEXT_BYTES, MESH_CONTEXT_TURNS, MESH_INPUT_BYTES, meshHandoffRequest } from './mesh-handoff-request';

const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] } });

/** A running mesh with this input and these turns' texts (alternating speakers), as the router folds it. */
function stateWith(input: string | null, texts: string[]): MeshRunState {
  return {
    status: 'running',
    mesh_run_id: 'mr-1',
    project: 'acme',
    mesh,
    input,
    started_by: 'olga',
    variables: {},
    speaker: 'triage',
    handoff_id: 'mh-1',
    turns: texts.length,
    transcript: texts.map((text, i) => ({ turn: i + 1, agent: i % 2 === 0 ? 'triage' : 'billing', text })),
    path: [],
    ignored: 0,
    applied: [],
    answered: [],
  } as unknown as MeshRunState;
}

const request = (state: MeshRunState) =>
  meshHandoffRequest({ project: 'acme', eventId: 'ev-1', state, handoffId: 'mh-2', to: 'triage', from: null, turn: state.turns + 1, tool: null });
const meshContext = (state: MeshRunState) => (request(state).context as { mesh: Record<string, unknown> }).mesh;
const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

describe('the handoff of a mesh turn: what its context carries', () => {
  it('carries the user`s input whole, far past the short-text cap (the entry agent answers all of it)', () => {
    const input = `${'A'.repeat(5_000)} FINAL-QUESTION?`;
    const context = meshContext(stateWith(input, []));
    expect(context['input']).toBe(input);
    expect(context).not.toHaveProperty('input_clipped');
    expect(input.length).toBeGreaterThan(Limits.maxShortText);
  });

  it('an input past what a context carries is cut to its first part, and says how long it was', () => {
    // 100 000 three-byte characters: 300 KB, more than a message may be.
    const input = '测'.repeat(100_000);
    const context = meshContext(stateWith(input, []));
    expect(context['input_clipped']).toEqual({ chars: 100_000 });
    expect(bytes(context['input'])).toBeLessThanOrEqual(MESH_INPUT_BYTES);
    expect(String(context['input']).endsWith('…')).toBe(true);
    expect(String(context['input']).startsWith('测'.repeat(1_000))).toBe(true);
    // Characters, as the caps count them: an emoji (two UTF-16 units) is one.
    expect(meshContext(stateWith('😀'.repeat(40_000), []))['input_clipped']).toEqual({ chars: 40_000 });
  });

  it('keeps the latest turns that fit beside the input: the create stays within a message, the rest counted as omitted', () => {
    const turns = Array.from({ length: 30 }, (_, i) => `${i}:${'测'.repeat(3_990)}`);
    const state = stateWith('测'.repeat(40_000), turns);
    const body = request(state);
    const context = meshContext(state);
    const transcript = context['transcript'] as Array<{ turn: number }>;
    expect(bytes(context)).toBeLessThanOrEqual(MESH_CONTEXT_BYTES);
    expect(bytes(body)).toBeLessThan(Limits.maxMessageBytes);
    expect(transcript.length).toBeGreaterThan(0);
    expect(transcript.length).toBeLessThan(MESH_CONTEXT_TURNS);
    // The newest turns, oldest first, and every other turn counted.
    expect(transcript.at(-1)!.turn).toBe(30);
    expect(transcript.map((t) => t.turn)).toEqual(Array.from({ length: transcript.length }, (_, i) => 31 - transcript.length + i));
    expect(context['transcript_omitted']).toBe(30 - transcript.length);
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true);
  });

  it('short turns: the latest 20, as before', () => {
    const context = meshContext(
      stateWith(
        'hi',
        Array.from({ length: 25 }, (_, i) => `turn ${i + 1}`),
      ),
    );
    expect((context['transcript'] as unknown[]).length).toBe(MESH_CONTEXT_TURNS);
    expect(context['transcript_omitted']).toBe(5);
    expect(Object.keys(context)).toEqual([
      'name',
      'mesh_run_id',
      'turn',
      'max_iterations',
      'from',
      'tool',
      'input',
      'transcript',
      'transcript_omitted',
      'handoff_tools',
      'report_subject_kind',
    ]);
  });
});
