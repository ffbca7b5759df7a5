import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/*
 * Every Markdown table in the repository's docs renders as a table: its second line is the
 * header's separator and every row has as many cells as the header. A paragraph inserted between
 * two rows (the rows after it then render as loose text) or a stray backtick in a cell (it opens a
 * code span that swallows the cell borders) fails here, naming the file and line. Pure file reads.
 */

const root = join(__dirname, '..', '..');

/** The Markdown pages a reader of the repository is sent to: the root, docs/, each app's, lib's and infra's. */
function pages(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'schemas') walk(path);
      } else if (entry.name.endsWith('.md')) out.push(path);
    }
  };
  for (const entry of readdirSync(root, { withFileTypes: true })) if (entry.isFile() && entry.name.endsWith('.md')) out.push(entry.name);
  for (const dir of ['docs', 'apps', 'libs', 'infra', 'bench']) walk(dir);
  return out.sort();
}

/** The cells of a table line: code spans and escaped pipes are not borders. */
export function cellCount(line: string): number {
  let cells = 0;
  let inCode = false;
  const text = line.trim();
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '`') inCode = !inCode;
    else if (c === '|' && !inCode) cells++;
  }
  // `| a | b |` has three borders and two cells; a row without the closing border has as many as borders.
  return text.endsWith('|') ? cells - 1 : cells;
}

const SEPARATOR = /^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

/** Each table's problems: where it is and what is wrong. */
export function tableProblems(markdown: string): string[] {
  const lines = markdown.split('\n');
  const problems: string[] = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced || !line.startsWith('|')) continue;
    let end = i;
    while (end < lines.length && (lines[end] ?? '').startsWith('|')) end++;
    const block = lines.slice(i, end);
    if (block.length < 2 || !SEPARATOR.test(block[1] ?? '')) {
      problems.push(`line ${i + 1}: a table row without a header and separator above it: ${line.slice(0, 80)}`);
    } else {
      const want = cellCount(block[0] ?? '');
      block.forEach((row, k) => {
        const got = cellCount(row);
        if (k !== 1 && got !== want) problems.push(`line ${i + k + 1}: ${got} cells where the header has ${want}: ${row.slice(0, 80)}`);
      });
    }
    i = end - 1;
  }
  return problems;
}

describe('the Markdown tables of the docs render as tables', () => {
  it('the checker finds what it looks for (a check that finds nothing would prove nothing)', () => {
    const good = '| a | b |\n| --- | --- |\n| `x \\| y` | z |\n';
    expect(tableProblems(good)).toEqual([]);
    expect(tableProblems('| a | b |\n| --- | --- |\n| 1 | 2 |\n\nA paragraph.\n| 3 | 4 |\n')).toEqual([
      'line 6: a table row without a header and separator above it: | 3 | 4 |',
    ]);
    expect(tableProblems('| a | b |\n| --- | --- |\n| the project`s | 2 |\n')).toHaveLength(1);
    expect(tableProblems('```\n| not | a table |\n```\n')).toEqual([]);
    expect(pages()).toEqual(expect.arrayContaining(['README.md', 'ARCHITECTURE.md', join('docs', 'errors.md'), join('libs', 'sdk', 'README.md')]));
  });

  it('every table in every page has its header and as many cells in each row', () => {
    const found: string[] = [];
    for (const page of pages()) {
      for (const problem of tableProblems(readFileSync(join(root, page), 'utf8'))) found.push(`${relative(root, join(root, page))} ${problem}`);
    }
    expect(found).toEqual([]);
  });
});
