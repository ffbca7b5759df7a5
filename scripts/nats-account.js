'use strict';
// The first connection to `npm start`'s own nats-server, made before any service starts.
const path = require('node:path');

/**
 * Connect once to the nats-server as the deployment's admin and ask JetStream for the account's
 * info, then close: the server registers the account and enables its JetStream on this one
 * connection, before the services connect.
 *
 * Why: nats-server 2.9 registers an account of its memory resolver at the account's first client,
 * and enables its JetStream then. The four services connecting at once are four first clients: two
 * enablings can run together, and on a fresh store each one checks it can make the account's
 * streams folder by creating it and removing it again — one removes it while the other is making
 * it, and the server logs `[ERR] Error configuring jetstream for account [<account>/BATON]: could
 * not create storage streams directory - mkdir …/streams: no such file or directory` (harmless:
 * the other enabling succeeded). Seen on a fresh clone's first `npm start`; measured on three
 * clients connecting at once to a fresh store: 3 starts in 105.
 *
 * `root`: the checkout (its dist/ is built); `url`, `creds` (the admin's credentials file) and
 * `prefix` (the deployment's subject prefix) as `baton nats-config` gave them.
 */
async function enableAccountJetStream(root, { url, creds, prefix }) {
  const { connectNats } = require(path.join(root, 'dist', 'libs', 'eventstore', 'src'));
  const { inboxPrefixOf } = require(path.join(root, 'dist', 'libs', 'contracts', 'src'));
  const handle = await connectNats({
    servers: url,
    name: 'baton-npm-start',
    credsFile: creds,
    inboxPrefix: inboxPrefixOf(prefix, { kind: 'op', relay: 'admin' }),
    reconnect: false,
    timeoutMs: 10_000,
  });
  try {
    await handle.jsm.getAccountInfo();
  } finally {
    await handle.close();
  }
}

module.exports = { enableAccountJetStream };
