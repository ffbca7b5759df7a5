// What `npm start` (scripts/start.js) shows of the warnings `baton nats-config --json` writes.
'use strict';

/**
 * The warnings of a `baton … --json` that succeeded: its stderr's `{"warnings":[{ code, message }]}`
 * line. A line that is no such JSON (a CLI of another release) is passed on as its own message,
 * with no code.
 */
function cliWarnings(stderr) {
  const warnings = [];
  for (const line of stderr.split('\n')) {
    if (line.trim() === '') continue;
    let parsed = null;
    try {
      parsed = JSON.parse(line);
    } catch {
      // not JSON: said as it is
    }
    if (Array.isArray(parsed?.warnings)) warnings.push(...parsed.warnings);
    else warnings.push({ code: null, message: line });
  }
  return warnings;
}

/**
 * The lines npm start prints for what nats-config warned of (`stderr`; `summary` is its `--json`
 * output): `[start] warning (<code>): <message>` each. With `ownServer` (npm start is about to
 * start the server from that file itself, and no server of this checkout runs: it checked) a
 * listen nats-config changed is npm start's own choice of a free port, so `restart_required` for
 * listen alone is left out: there is nothing running to restart. One that names store_dir is
 * shown (the JetStream data stays in the former folder).
 */
function natsConfigWarningLines(stderr, summary, { ownServer }) {
  const listenOnly = (summary.changed ?? []).every((change) => change.setting === 'listen');
  return cliWarnings(stderr)
    .filter((warning) => !(ownServer && warning.code === 'restart_required' && listenOnly))
    .map((warning) => `[start] warning${warning.code ? ` (${warning.code})` : ''}: ${warning.message}`);
}

module.exports = { cliWarnings, natsConfigWarningLines };
