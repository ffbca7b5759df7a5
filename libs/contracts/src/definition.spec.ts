import { findWorkflow, ProjectDefinitionSchema, resolveLead, WorkflowDefinitionSchema } from './definition';

const steps = [
  { id: 'analyze', agent: 'architect', next: 'context' },
  { id: 'context', agent: 'context', next: 'plan' },
  { id: 'plan', agent: 'architect', terminal: true },
];
const workflow = { name: 'feature', version: 1, entry: 'analyze', steps };

function issuesOf(result: { success: boolean; error?: { issues: { message: string }[] } }): string[] {
  return result.success ? [] : (result.error?.issues.map((i) => i.message) ?? []);
}

describe('workflow definitions (minimal: steps joined by next edges)', () => {
  it('accepts the seed 000 §6 workflow, where one agent runs two steps', () => {
    expect(WorkflowDefinitionSchema.parse(workflow).steps).toHaveLength(3);
  });

  it('refuses duplicate step ids', () => {
    const result = WorkflowDefinitionSchema.safeParse({ ...workflow, steps: [...steps, { id: 'plan', agent: 'x' }] });
    expect(issuesOf(result)).toContain("step id 'plan' is used twice");
  });

  it('refuses an entry that is not a step', () => {
    expect(issuesOf(WorkflowDefinitionSchema.safeParse({ ...workflow, entry: 'nope' }))).toContain("entry 'nope' is not a step of workflow 'feature'");
  });

  it('refuses a next edge to a step that does not exist', () => {
    const bad = { ...workflow, steps: [{ id: 'analyze', agent: 'architect', next: 'ghost' }] };
    expect(issuesOf(WorkflowDefinitionSchema.safeParse(bad))).toContain("next 'ghost' of step 'analyze' is not a step of this workflow");
  });

  it('refuses a terminal step with a next edge', () => {
    const bad = { ...workflow, steps: [{ id: 'analyze', agent: 'architect', next: 'analyze', terminal: true }] };
    expect(issuesOf(WorkflowDefinitionSchema.safeParse(bad))).toContain("terminal step 'analyze' cannot have a next edge");
  });

  it('refuses unknown keys (a typo such as nxt is an error, not a silent dead end)', () => {
    expect(WorkflowDefinitionSchema.safeParse({ ...workflow, steps: [{ id: 'a', agent: 'b', nxt: 'c' }], entry: 'a' }).success).toBe(false);
  });
});

describe('project definitions', () => {
  const project = { project: 'demo', agents: [{ name: 'architect', role: 'Architect' }, { name: 'context' }], workflows: [workflow] };

  it('every step agent must be listed in the project', () => {
    expect(ProjectDefinitionSchema.safeParse(project).success).toBe(true);
    const missing = { ...project, agents: [{ name: 'architect' }] };
    expect(issuesOf(ProjectDefinitionSchema.safeParse(missing))).toContain("agent 'context' of step 'context' is not listed in the project's agents");
  });

  it('agent names and (workflow, version) pairs are unique', () => {
    const twice = { ...project, agents: [...project.agents, { name: 'context' }], workflows: [workflow, workflow] };
    const issues = issuesOf(ProjectDefinitionSchema.safeParse(twice));
    expect(issues).toContain("agent 'context' is listed twice");
    expect(issues).toContain("workflow 'feature@1' is defined twice");
  });

  it('lead names an agent when it matches one, else a person', () => {
    expect(resolveLead(ProjectDefinitionSchema.parse({ ...project, lead: 'architect' }))).toEqual({ kind: 'agent', name: 'architect' });
    expect(resolveLead(ProjectDefinitionSchema.parse({ ...project, lead: 'alice' }))).toEqual({ kind: 'person', handle: 'alice' });
    expect(resolveLead(ProjectDefinitionSchema.parse(project))).toBeNull();
  });

  it('an agent may carry an auth profile (JSON definitions too): required defaults to true, variable to authenticated; anything else is refused', () => {
    const withAuth = (auth: unknown) => ProjectDefinitionSchema.safeParse({ ...project, agents: [{ name: 'architect', auth }, { name: 'context' }] });
    const agentAuth = (auth: unknown) => {
      const parsed = withAuth(auth);
      return parsed.success ? parsed.data.agents[0]!.auth : undefined;
    };
    expect(agentAuth({})).toEqual({ required: true, variable: 'authenticated' });
    expect(agentAuth({ required: true, variable: 'customer_verified' })).toEqual({ required: true, variable: 'customer_verified' });
    expect(agentAuth({ required: false })).toEqual({ required: false, variable: 'authenticated' });
    expect(ProjectDefinitionSchema.parse(project).agents[0]!.auth).toBeUndefined();
    for (const bad of ['required', { required: 'true' }, { variable: 'customer verified' }, { required: true, varaible: 'x' }]) {
      expect(withAuth(bad).success).toBe(false);
    }
  });

  it('findWorkflow returns the named version, or the highest when none is named', () => {
    const parsed = ProjectDefinitionSchema.parse({ ...project, workflows: [workflow, { ...workflow, version: 3 }, { ...workflow, version: 2 }] });
    expect(findWorkflow(parsed, 'feature')?.version).toBe(3);
    expect(findWorkflow(parsed, 'feature', 2)?.version).toBe(2);
    expect(findWorkflow(parsed, 'other')).toBeUndefined();
  });
});
