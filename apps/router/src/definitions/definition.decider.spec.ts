import { ProjectDefinitionSchema, type DefinitionEvent, type ProjectDefinition } from '@baton/contracts';
import { fold } from '@baton/domain';
import { definitionDecider, findPublishedWorkflow, workflowForStart, type PublishDefinition } from './definition.decider';
import { definitionDigest } from './digest';

const NOW = '2025-01-01T00:00:00.000Z';

const project = (workflows: unknown[]): ProjectDefinition =>
  ProjectDefinitionSchema.parse({ project: 'demo', agents: [{ name: 'a' }, { name: 'b' }], workflows });
const flow = (version: number, next?: string) => ({
  name: 'flow',
  version,
  entry: 's1',
  steps: [
    { id: 's1', agent: 'a', ...(next ? { next } : {}) },
    { id: 's2', agent: 'b' },
  ],
});
const publish = (definition: ProjectDefinition): PublishDefinition => ({
  type: 'publish',
  data: { definition, digest: definitionDigest(definition), published_by: 'olga' },
  metadata: { now: NOW },
});
const published = (definition: ProjectDefinition): DefinitionEvent => ({
  type: 'definition.published',
  data: { definition, digest: definitionDigest(definition), published_by: 'olga', published_at: NOW },
});
const decide = (history: DefinitionEvent[], command: PublishDefinition) => definitionDecider.decide(command, fold(definitionDecider, history));

describe('definition aggregate', () => {
  it('publishing the current definition again (same digest) is a no-op, whatever the key order', () => {
    const v1 = project([flow(1, 's2')]);
    const reordered = ProjectDefinitionSchema.parse(JSON.parse(JSON.stringify({ workflows: v1.workflows, agents: v1.agents, project: 'demo' })));
    expect(decide([published(v1)], publish(reordered))).toEqual({ ok: true, events: [] });
  });

  it('a different definition is a new definition.published', () => {
    const result = decide([published(project([flow(1, 's2')]))], publish(project([flow(1, 's2'), flow(2)])));
    expect(result.ok && result.events.map((e) => e.type)).toEqual(['definition.published']);
  });

  it('a published workflow version is immutable: other steps under the same version are refused', () => {
    const result = decide([published(project([flow(1, 's2')]))], publish(project([flow(1)])));
    expect(result).toMatchObject({ ok: false, error: { code: 'workflow_version_changed' } });
  });

  it('a run keeps its pinned workflow version after a later definition dropped it', () => {
    const state = fold(definitionDecider, [published(project([flow(1, 's2')])), published(project([flow(2)]))]);
    expect(findPublishedWorkflow(state, 'flow', 1)?.workflow.steps[0]?.next).toBe('s2');
    expect(findPublishedWorkflow(state, 'flow', 3)).toBeUndefined();
  });

  it('a start without a version takes the highest version of the current definition', () => {
    const state = fold(definitionDecider, [published(project([flow(1, 's2'), flow(2)]))]);
    expect(workflowForStart(state, 'flow')?.workflow.version).toBe(2);
    expect(workflowForStart(state, 'flow', 1)?.workflow.version).toBe(1);
    expect(workflowForStart(fold(definitionDecider, []), 'flow')).toBeUndefined();
  });
});
