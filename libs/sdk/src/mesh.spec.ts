import { AgentResultSchema, handoffToolName } from '@baton/contracts';
import {
  anthropicHandoffTools,
  handoffCallsFromAnthropic,
  handoffCallsFromOpenAi,
  MeshBuildError,
  meshHandoffTools,
  meshTurnResult,
  openAiHandoffTools,
} from './mesh';

const mesh = { name: 'support', entry: 'triage', handoffs: { triage: ['billing', 'tech-support'], billing: ['triage'] } };

describe("mesh handoff tools (seed 004: the SDK produces each agent's handoff tool definitions)", () => {
  it('each agent gets one handoff_to_<target> tool per granted target, with an object JSON Schema', () => {
    const tools = meshHandoffTools(mesh, 'triage', { roles: { billing: 'Billing specialist' } });
    expect(tools.map((t) => [t.name, t.target])).toEqual([
      ['handoff_to_billing', 'billing'],
      ['handoff_to_tech_support', 'tech-support'],
    ]);
    expect(tools[0]!.description).toContain('Billing specialist');
    expect(tools[0]!.parameters).toMatchObject({ type: 'object', additionalProperties: false, required: [] });
    expect(meshHandoffTools(mesh, 'tech-support')).toEqual([]);
  });

  it('provides both OpenAI-style and Anthropic-style tool shapes', () => {
    const [openai] = openAiHandoffTools(mesh, 'billing');
    expect(openai).toEqual({
      type: 'function',
      function: { name: 'handoff_to_triage', description: expect.any(String), parameters: expect.objectContaining({ type: 'object' }) },
    });
    const [anthropic] = anthropicHandoffTools(mesh, 'billing');
    expect(anthropic).toEqual({ name: 'handoff_to_triage', description: expect.any(String), input_schema: expect.objectContaining({ type: 'object' }) });
  });

  it('self-handoffs and colliding sanitized tool names are rejected when the mesh is built', () => {
    expect(() => meshHandoffTools({ ...mesh, handoffs: { triage: ['triage'] } }, 'triage')).toThrow(MeshBuildError);
    expect(() => meshHandoffTools({ ...mesh, handoffs: { triage: ['Billing', 'billing'] } }, 'triage')).toThrow(/MESH_TOOL_NAME_COLLISION/);
    expect(() => meshHandoffTools(mesh, 'triage', { agents: ['triage', 'billing'] })).toThrow(/MESH_UNKNOWN_TARGET/);
  });

  it("converts provider tool calls into the turn's handoff_tool_calls, in call order, leaving other tools out", () => {
    expect(
      handoffCallsFromOpenAi([
        { id: 'c1', function: { name: 'lookup_invoice', arguments: '{}' } },
        { id: 'c2', function: { name: handoffToolName('billing'), arguments: '{"reason":"invoice"}' } },
        { id: 'c3', function: { name: 'handoff_to_tech_support', arguments: 'not json' } },
      ]),
    ).toEqual([
      { tool: 'handoff_to_billing', call_id: 'c2', arguments: { reason: 'invoice' } },
      { tool: 'handoff_to_tech_support', call_id: 'c3', arguments: {} },
    ]);
    expect(handoffCallsFromAnthropic([{ type: 'text' }, { type: 'tool_use', id: 't1', name: 'handoff_to_billing', input: { reason: 'x' } }])).toEqual([
      { tool: 'handoff_to_billing', call_id: 't1', arguments: { reason: 'x' } },
    ]);
  });

  it('a mesh turn travels as an AgentResult whose workflow_run_id is the mesh run', () => {
    const result = meshTurnResult({
      project: 'demo',
      mesh_run_id: 'm1',
      agent: 'triage',
      result_id: 'r1',
      text: 'hi',
      handoff_tool_calls: [{ tool: 'handoff_to_billing' }],
      produced_at: '2025-01-01T00:00:00.000Z',
    });
    expect(AgentResultSchema.parse(result)).toMatchObject({ workflow_run_id: 'm1', body: 'hi', run_id: 'r1' });
    expect(() => meshTurnResult({ project: 'demo', mesh_run_id: 'bad id', agent: 'triage', result_id: 'r1', text: '' })).toThrow(/invalid mesh turn/);
  });
});
