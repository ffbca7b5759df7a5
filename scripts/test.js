#!/usr/bin/env node
// `npm test`: every Nx project's Jest suite (unit and integration), then one closing line with the
// totals across projects: "Tests: N passed, N failed". When a test fails, its report (Jest's
// "● suite › test" block) is printed again just before that line: with many projects streaming
// at once, a failure's report is otherwise lost in the middle of thousands of lines.
'use strict';
const { spawn } = require('node:child_process');

const args = ['nx', 'run-many', '-t', 'test', '--outputStyle=stream', '--skip-nx-cache', '--parallel=2', ...process.argv.slice(2)];
const child = spawn('npx', args, {
  stdio: ['ignore', 'pipe', 'pipe'],
  env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', FORCE_COLOR: '0' },
});
let passed = 0;
let failed = 0;
let skipped = 0;
let buffer = '';
// Failure reports, per project: a block opens at a "<project>: ● …" line (but for the
// "● Console" of logged output) and takes that project's next lines, up to a bound.
const REPORT_LINES = 40;
const reports = [];
const open = new Map();
function collect(line) {
  const m = /^([\w.-]+):\s(.*)$/.exec(line);
  if (!m) return;
  const [, project, rest] = m;
  if (/^\s*● /.test(rest) && !/^\s*● Console\s*$/.test(rest)) {
    const block = [line];
    reports.push(block);
    open.set(project, block);
    return;
  }
  if (/^\s*(PASS|FAIL|● Console) /.test(rest) || /^\s*● Console\s*$/.test(rest) || /^Test Suites:/.test(rest.trim())) {
    open.delete(project);
    return;
  }
  const block = open.get(project);
  if (!block) return;
  block.push(line);
  if (block.length >= REPORT_LINES) open.delete(project);
}
function scan(chunk) {
  buffer += chunk;
  let index;
  while ((index = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, index).replace(/\u001b\[[0-9;]*m/g, '');
    buffer = buffer.slice(index + 1);
    collect(line);
    const match = /Tests:\s+(.*) total/.exec(line);
    if (match) {
      for (const part of match[1].split(',')) {
        const m = /(\d+) (passed|failed|skipped|todo)/.exec(part.trim());
        if (!m) continue;
        if (m[2] === 'passed') passed += Number(m[1]);
        else if (m[2] === 'failed') failed += Number(m[1]);
        else skipped += Number(m[1]);
      }
    }
  }
}
child.stdout.on('data', (chunk) => { process.stdout.write(chunk); scan(chunk.toString()); });
child.stderr.on('data', (chunk) => { process.stderr.write(chunk); scan(chunk.toString()); });
child.on('exit', (code) => {
  if (reports.length > 0) {
    console.log(`\n== ${reports.length} failure report(s), again:`);
    for (const block of reports.slice(0, 20)) console.log(block.join('\n'));
  }
  console.log(`\nTests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(code === 0 && failed === 0 ? 0 : code || 1);
});
