import { commands } from './commands';
import { HELP_GROUPS } from './main';

describe('baton help', () => {
  it('lists every command under exactly one heading, and names no command that does not exist', () => {
    const listed = HELP_GROUPS.flatMap(([, names]) => names);
    expect([...listed].sort()).toEqual(commands.map((c) => c.name).sort());
    expect(new Set(listed).size).toBe(listed.length);
  });
});
