import { projectView } from './project-directory';

describe('project view: what the ledger fills into commands from the project definition', () => {
  const definition = {
    project: 'shop',
    lead: 'lena',
    agents: [{ name: 'alice' }, { name: 'bob', role: 'dev' }, { name: 'lena', role: '  ' }],
    workflows: [],
  };

  it('the roster is the definition`s agents and its lead', () => {
    expect(projectView(definition).roster).toEqual({ visible_actors: ['alice', 'bob', 'lena'], project_lead: 'lena' });
  });

  it('with no definition the roster is empty and there is no lead', () => {
    expect(projectView(null).roster).toEqual({ visible_actors: [] });
  });

  it('a lead that is not a valid actor name (a person`s display handle) is not used as a handback recipient', () => {
    expect(projectView({ ...definition, lead: 'Lena Smith' }).roster).not.toHaveProperty('project_lead');
  });

  it('a claimer`s roles: its agent role (never a blank one), and `operator` for operators and humans', () => {
    const view = projectView(definition);
    expect(view.rolesOf('bob', 'agent')).toEqual(['dev']);
    expect(view.rolesOf('lena', 'agent')).toEqual([]);
    expect(view.rolesOf('olga', 'operator')).toEqual(['operator']);
    expect(view.rolesOf('stranger', 'agent')).toEqual([]);
  });

  it('an agent whose definition names a role people hold (operator, admin, viewer) does not get it: a handback for the operators stays theirs', () => {
    const view = projectView({
      ...definition,
      agents: [
        { name: 'opsbot', role: 'operator' },
        { name: 'root', role: ' admin ' },
        { name: 'peek', role: 'viewer' },
        { name: 'ops2', role: 'Operator' },
      ],
    });
    expect(view.rolesOf('opsbot', 'agent')).toEqual([]);
    expect(view.rolesOf('root', 'agent')).toEqual([]);
    expect(view.rolesOf('peek', 'agent')).toEqual([]);
    // Roles are compared exactly: `Operator` is an agent role like any other, and no handoff Baton addresses names it.
    expect(view.rolesOf('ops2', 'agent')).toEqual(['Operator']);
    expect(view.rolesOf('opsbot', 'operator')).toEqual(['operator']);
  });
});
