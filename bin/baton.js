#!/usr/bin/env node
// The `baton` command. Runs the built CLI (dist/apps/cli/src/main.js). When it is missing, or a
// source file of the CLI or a library it uses is newer than the build, it first builds it with
// `nx run cli:build` (swc, a few seconds; libraries included). Build output goes to stderr so
// `--json` output on stdout stays clean; with `--json` it is not shown at all unless the build
// fails with no earlier build to run (one JSON line then). BATON_CLI_NO_BUILD=1 skips the check.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const entry = path.join(root, 'dist', 'apps', 'cli', 'src', 'main.js');

/** The newest mtime of a non-test .ts file under `dir` (0 when the folder does not exist). */
function newestSource(dir) {
  let newest = 0;
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const item of entries) {
    const file = path.join(dir, item.name);
    if (item.isDirectory()) newest = Math.max(newest, newestSource(file));
    else if (item.name.endsWith('.ts') && !item.name.endsWith('.spec.ts') && !item.name.endsWith('.int-spec.ts')) {
      newest = Math.max(newest, fs.statSync(file).mtimeMs);
    }
  }
  return newest;
}

function stale() {
  if (!fs.existsSync(entry)) return 'missing';
  if (process.env.BATON_CLI_NO_BUILD === '1') return null;
  const built = fs.statSync(entry).mtimeMs;
  const dirs = [path.join(root, 'apps', 'cli', 'src')];
  try {
    for (const lib of fs.readdirSync(path.join(root, 'libs'))) dirs.push(path.join(root, 'libs', lib, 'src'));
  } catch {
    // an installed copy without sources: use the build as it is
  }
  return dirs.some((dir) => newestSource(dir) > built) ? 'stale' : null;
}

const state = stale();
if (state !== null) {
  // With --json, stderr carries only the one JSON line of a failure: the build's own output is kept
  // back, and shown (as that line) only when no build is left to run.
  const json = process.argv.slice(2).some((arg) => arg === '--json' || arg === '--json-page');
  if (!json) process.stderr.write(`baton: ${state === 'missing' ? 'building' : 'rebuilding'} the CLI (nx run cli:build)...\n`);
  const build = spawnSync('npx', ['nx', 'run', 'cli:build', '--outputStyle=static'], {
    cwd: root,
    stdio: json ? ['ignore', 'pipe', 'pipe'] : ['ignore', process.stderr, process.stderr],
    env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (build.status !== 0 || !fs.existsSync(entry)) {
    if (!fs.existsSync(entry)) {
      const message = 'the CLI is not built and building it failed; run `npm run build` first';
      if (json) {
        const output = `${build.stdout || ''}${build.stderr || ''}`.slice(-4000);
        process.stderr.write(`${JSON.stringify({ error: { code: 'cli_not_built', message, issues: [], details: { build_output: output } } })}\n`);
      } else process.stderr.write(`baton: ${message}\n`);
      process.exit(1);
    }
    if (!json) process.stderr.write('baton: warning: rebuilding failed; running the previous build\n');
  }
}

// Loading the CLI takes a second or more on a busy machine: a Ctrl-C (or SIGTERM) meanwhile stops it
// before any command began, and says so, instead of the process dying without a word. Once loaded,
// each command handles signals itself (replay and verify from their first step; docs/sre.md).
const jsonOutput = process.argv.slice(2).includes('--json');
const beforeStart = (signal) => {
  const message = `${signal} before the command began; nothing was done`;
  process.stderr.write(jsonOutput ? `${JSON.stringify({ error: { code: 'interrupted', message, issues: [] } })}\n` : `baton: ${message}\n`);
  process.exit(130);
};
process.on('SIGINT', beforeStart);
process.on('SIGTERM', beforeStart);
process.on('SIGHUP', beforeStart);
const cli = require(entry);
// A signal that came while the (synchronous) loading ran is delivered on the event loop's next
// turn: this handler stays until then, so it hears it.
setImmediate(() => {
  process.off('SIGINT', beforeStart);
  process.off('SIGTERM', beforeStart);
  process.off('SIGHUP', beforeStart);
});

// Run as its own process, replay and verify yield the CPU to the live services unless told otherwise.
cli
  .main(process.argv.slice(2), { env: { BATON_REBUILD_NICE: cli.DEFAULT_REBUILD_NICE, ...process.env } })
  .then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write(`baton: ${error && error.stack ? error.stack : String(error)}\n`);
      process.exitCode = 1;
    },
  );
