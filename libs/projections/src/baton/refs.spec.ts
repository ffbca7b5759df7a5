import fc from 'fast-check';
import { idLookupMember, idLookupRange, parseProjectRef, projectRef, projectsOfLookup } from './refs';

describe('project refs: one encoding for every key that names a record', () => {
  it('`<project>:<id>` splits at the first ":" whatever the id holds', () => {
    expect(projectRef('alpha', 'h-1')).toBe('alpha:h-1');
    expect(projectRef('alpha', 'a:b@c:d')).toBe('alpha:a:b@c:d');
    expect(parseProjectRef('alpha:a:b@c:d')).toEqual({ project: 'alpha', id: 'a:b@c:d' });
    expect(parseProjectRef('nocolon')).toBeNull();
    expect(parseProjectRef(':x')).toBeNull();
    expect(parseProjectRef('alpha:')).toBeNull();
  });

  it('refuses a project key that could make a ref ambiguous', () => {
    expect(() => projectRef('al:pha', 'x')).toThrow(/invalid project key/);
    expect(() => projectRef('Alpha', 'x')).toThrow(/invalid project key/);
    expect(() => projectRef('alpha', '')).toThrow(/invalid id/);
  });

  it('distinct (project, id) pairs never share a ref (property)', () => {
    const project = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,8}$/);
    const id = fc.stringMatching(/^[A-Za-z0-9_\-:@]{1,12}$/);
    fc.assert(
      fc.property(project, id, project, id, (p1, i1, p2, i2) => {
        fc.pre(p1 !== p2 || i1 !== i2);
        expect(projectRef(p1, i1)).not.toBe(projectRef(p2, i2));
        expect(parseProjectRef(projectRef(p1, i1))).toEqual({ project: p1, id: i1 });
      }),
      { numRuns: 300 },
    );
  });

  it('the id lookup range selects exactly the members of one id (not ids it prefixes)', () => {
    const members = [
      idLookupMember('alpha', 'h-1'),
      idLookupMember('beta', 'h-1'),
      idLookupMember('gamma', 'h-10'),
      idLookupMember('delta', 'h-1:x'),
      idLookupMember('eps', 'h-1@y'),
      idLookupMember('zeta', 'h-'),
    ].sort();
    const { min, max } = idLookupRange('h-1');
    const inRange = members.filter((m) => m >= min.slice(1) && m < max.slice(1));
    expect(projectsOfLookup(inRange)).toEqual(['alpha', 'beta']);
  });
});
