#!/usr/bin/env node
// `npm test`: every Nx project's Jest suite (unit and integration), then one closing line with the
// totals across projects: "Tests: N passed, N failed".
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
function scan(chunk) {
  buffer += chunk;
  let index;
  while ((index = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, index).replace(/\u001b\[[0-9;]*m/g, '');
    buffer = buffer.slice(index + 1);
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
  console.log(`\nTests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(code === 0 && failed === 0 ? 0 : code || 1);
});
