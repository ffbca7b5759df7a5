import type { ParsedArgs } from '../command';
import type { CliIo } from '../output';
import { printPage } from './paging';

function capture(): { io: CliIo; out: () => string; err: () => string } {
  let text = '';
  let errors = '';
  return {
    io: { stdout: { write: (t: string) => (text += t) }, stderr: { write: (t: string) => (errors += t) }, stderrIsTTY: false },
    out: () => text,
    err: () => errors,
  };
}

const args = (values: ParsedArgs['values']): ParsedArgs => ({ values, positionals: [], help: false });
const columns = [{ header: 'id', value: (row: { id: string }) => row.id }];

describe('a listing`s next page hint', () => {
  it('repeats the filters and the limit with the new cursor: a cursor carries only the position, so the hint must name the same listing', () => {
    const { io, out } = capture();
    printPage(
      io,
      args({ project: 'bbstop3', why: ['budget', 'thrash'], limit: '1', cursor: 'old-cursor', json: false }),
      { items: [{ id: 'a' }], nextCursor: 'eyJ2IjoxfQ' },
      {
        command: 'stops',
        columns,
        empty: 'none',
      },
    );
    expect(out()).toContain('\nmore: baton stops --project bbstop3 --why budget --why thrash --limit 1 --cursor eyJ2IjoxfQ\n');
  });

  it('quotes a value the shell would split or expand', () => {
    const { io, out } = capture();
    printPage(io, args({ agent: "o'brien bot", order: 'urgent' }), { items: [{ id: 'a' }], nextCursor: 'c1' }, { command: 'inbox', columns, empty: 'none' });
    expect(out()).toContain(`more: baton inbox --agent 'o'\\''brien bot' --order urgent --cursor c1`);
  });

  it('no hint on the last page', () => {
    const { io, out } = capture();
    printPage(io, args({ project: 'p' }), { items: [{ id: 'a' }], nextCursor: null }, { command: 'stops', columns, empty: 'none' });
    expect(out()).not.toContain('more:');
  });
});

describe('a listing with --json', () => {
  it('writes the next cursor on stderr as a JSON line (stderr holds JSON only), the items on stdout', () => {
    const { io, out, err } = capture();
    printPage(io, args({ json: true }), { items: [{ id: 'a' }], nextCursor: 'eyJ2IjoxfQ' }, { command: 'inbox', columns, empty: 'none' });
    expect(JSON.parse(out())).toEqual([{ id: 'a' }]);
    expect(err()).toBe('{"next_cursor":"eyJ2IjoxfQ"}\n');
  });
});

describe('a listing table', () => {
  it('prints an id column whole however long (it is copied into the next command); other columns are cut', () => {
    const { io, out } = capture();
    const id = `stop:shop:stop-r-${'x'.repeat(90)}:res-1`;
    printPage(
      io,
      args({}),
      { items: [{ id, title: 't'.repeat(200) }], nextCursor: null },
      {
        command: 'inbox',
        columns: [
          { header: 'id', value: (row: { id: string; title: string }) => row.id, whole: true },
          { header: 'title', value: (row: { id: string; title: string }) => row.title, max: 50 },
        ],
        empty: 'none',
      },
    );
    expect(out()).toContain(id);
    expect(out()).toContain(`${'t'.repeat(49)}…`);
  });
});
