import { ProjectDefinitionSummarySchema, type ProjectDefinition } from '@baton/contracts';
import { projectSummaryOf, type SummarizedEvent } from './summary';

const at = '2026-01-01T00:00:00.000Z';

/** A definition of project p holding these workflow versions (one step each, on agent a). */
function definition(workflows: ReadonlyArray<[name: string, version: number]>): ProjectDefinition {
  return {
    project: 'p',
    agents: [{ name: 'a' }],
    workflows: workflows.map(([name, version]) => ({ name, version, entry: 's', steps: [{ id: 's', agent: 'a', terminal: true }] })),
  } as ProjectDefinition;
}

const published = (workflows: ReadonlyArray<[string, number]>): SummarizedEvent => ({
  type: 'definition.published',
  payload: { definition: definition(workflows), published_by: 'admin', published_at: at, digest: 'd' },
});

describe('projectSummaryOf: each workflow with its versions (baton project, GET /v1/projects/{project})', () => {
  it('workflows stays the names of the definition in force; workflow_versions lists every version ever published and those in force', () => {
    const summary = projectSummaryOf(
      'p',
      [
        published([
          ['ship', 1],
          ['review', 1],
        ]),
        published([
          ['ship', 1],
          ['ship', 2],
          ['triage', 4],
        ]),
        published([
          ['triage', 4],
          ['ship', 3],
          ['ship', 2],
        ]),
      ],
      [],
    );
    // The names, each once, as clients have always read them.
    expect(summary.definition?.workflows).toEqual(['triage', 'ship']);
    expect(summary.definition?.workflow_versions).toEqual([
      { name: 'triage', versions: [4], in_force: [4] },
      // v1 only earlier publishes held: a run in flight may still be pinned to it.
      { name: 'ship', versions: [1, 2, 3], in_force: [2, 3] },
      // Dropped from the definition in force: its versions are still named.
      { name: 'review', versions: [1], in_force: [] },
    ]);
    expect(ProjectDefinitionSummarySchema.safeParse(summary.definition).success).toBe(true);
  });

  it('one publish: every version is in force; no workflows, none listed', () => {
    const one = projectSummaryOf(
      'p',
      [
        published([
          ['ship', 2],
          ['ship', 1],
        ]),
      ],
      [],
    );
    expect(one.definition).toMatchObject({ workflows: ['ship'], workflow_versions: [{ name: 'ship', versions: [1, 2], in_force: [1, 2] }] });
    expect(projectSummaryOf('p', [published([])], []).definition).toMatchObject({ workflows: [], workflow_versions: [] });
  });

  it('a summary without workflow_versions (made before it was added) is still a valid summary', () => {
    const { workflow_versions: _left, ...older } = projectSummaryOf('p', [published([['ship', 1]])], []).definition!;
    expect(ProjectDefinitionSummarySchema.safeParse(older).success).toBe(true);
  });
});

describe('projectSummaryOf: who published and whom the admin connection named', () => {
  it('published_by is who sent it; the person it named is on_behalf_of (a claim) and absent when nobody was named', () => {
    const named: SummarizedEvent = { type: 'definition.published', payload: { ...(published([['ship', 1]]).payload as object), on_behalf_of: 'olga' } };
    const withClaim = projectSummaryOf('p', [named], []).definition!;
    expect(withClaim).toMatchObject({ published_by: 'admin', on_behalf_of: 'olga' });
    expect(ProjectDefinitionSummarySchema.safeParse(withClaim).success).toBe(true);
    expect(projectSummaryOf('p', [published([['ship', 1]])], []).definition).not.toHaveProperty('on_behalf_of');
  });
});
