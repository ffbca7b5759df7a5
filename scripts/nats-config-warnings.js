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
 * `restart_required` is left out: there is nothing running to restart. A store_dir it changed is
 * said as npm start's own `store_dir_changed`: the server it starts uses the new folder, and the
 * data of the former one is not used.
 */
function natsConfigWarningLines(stderr, summary, { ownServer }) {
  const changed = summary.changed ?? [];
  const lines = cliWarnings(stderr)
    // npm start's own server: no server of this checkout runs, so nothing is to be restarted; what a
    // store_dir change means for it is said below instead.
    .filter((warning) => !(ownServer && warning.code === 'restart_required'))
    .map((warning) => `[start] warning${warning.code ? ` (${warning.code})` : ''}: ${warning.message}`);
  const store = ownServer ? changed.find((change) => change.setting === 'store_dir') : undefined;
  if (store !== undefined)
    lines.push(
      `[start] warning (store_dir_changed): the deployment's nats-server.conf kept its JetStream data in ${store.from}; npm start of this checkout starts its nats-server on ${store.to}, so what ${store.from} holds is not used ` +
        `(to upgrade a deployment in another checkout, stop it and copy the whole var/ — the deployment folder and the store — or upgrade it in its own checkout)`,
    );
  return lines;
}

module.exports = { cliWarnings, natsConfigWarningLines };
