// `npm start` on a terminal prints readable log lines; piped, or with LOG_FORMAT=json, the JSON.
import { createRequire } from 'node:module';
import { join } from 'node:path';

// scripts/ holds plain Node scripts (no project of their own): load the one npm start uses.
const { readableLogLine } = createRequire(__filename)(join(__dirname, '..', '..', 'scripts', 'log-format.js')) as {
  readableLogLine: (line: string, options: { terminal: boolean; format?: string }) => string;
};

const line = JSON.stringify({
  time: '2026-12-01T15:21:06.180Z',
  level: 'warn',
  service: 'router',
  msg: 'result rejected',
  instance: 'router-1',
  code: 'claim_required',
  reason: 'no claim named',
});
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
const plain = (text: string) => text.replace(ANSI, '');

describe('npm start log lines', () => {
  it('on a terminal: time, level, message and the other fields as key=value (service and instance are in the prefix already)', () => {
    expect(plain(readableLogLine(line, { terminal: true }))).toBe('15:21:06.180 WARN  result rejected  code=claim_required reason="no claim named"');
  });

  it('piped or redirected, or with LOG_FORMAT=json: the JSON line unchanged', () => {
    expect(readableLogLine(line, { terminal: false })).toBe(line);
    expect(readableLogLine(line, { terminal: true, format: 'json' })).toBe(line);
  });

  it('a line that is not a JSON object is printed as it came', () => {
    for (const other of ['Starting…', '{not json', '[1,2]', 'null']) expect(readableLogLine(other, { terminal: true })).toBe(other);
  });
});
