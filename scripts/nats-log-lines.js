// Which lines of its nats-server's log `npm start` (scripts/start.js) shows on its terminal.
'use strict';

/**
 * nats-server 2.9 stops its system-account eventing first when it shuts down, then JetStream: the
 * advisories JetStream sends while it stops find no system account any more and are logged as
 * `[WRN] Advisory could not be sent for account "…": system account not setup`, although the
 * deployment's configuration sets one (`system_account`, written by `baton nats-config`). They say
 * nothing about the deployment: npm start keeps them in the log file and leaves them off the terminal
 * once the server has logged `Initiating Shutdown`.
 */
const SHUTDOWN_ADVISORY = /\[WRN\] Advisory could not be sent for account .*: system account not setup/;

/**
 * What to do with one line of the nats-server's output (`state` is kept per server: `{}` at its
 * start): `error` — an error or a warning, shown on stderr; `log` — a configuration reload, shown
 * on stdout; null — left to the log file alone.
 */
function natsLogLineShown(line, state) {
  if (line.includes('Initiating Shutdown')) state.shuttingDown = true;
  if (state.shuttingDown && SHUTDOWN_ADVISORY.test(line)) return null;
  if (/\[(ERR|WRN|FTL)\]/.test(line)) return 'error';
  if (line.includes('Reloaded server configuration')) return 'log';
  return null;
}

module.exports = { natsLogLineShown };
