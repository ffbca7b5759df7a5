// Where `npm start`'s own nats-server listens (scripts/start.js), and the note it keeps of the
// listen it chose itself.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

/** nats-config's default listen, and the one npm start tries first. */
const DEFAULT_LISTEN = '127.0.0.1:4222';

/**
 * The file in the deployment folder where npm start notes the listen it wrote itself (NATS_PORT,
 * or the port it picked): a listen of nats-server.conf other than that one is someone's choice.
 */
const START_RECORD = 'npm-start.json';

/** Why npm start cannot have its nats-server listen where it should: `code` is stable, the message says what to do. */
class NatsListenError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** `value` as a port (an integer from 1 to 65535 in decimal digits), or null. */
function portOf(value) {
  if (typeof value !== 'string' || !/^\d{1,5}$/.test(value)) return null;
  const port = Number(value);
  return port >= 1 && port <= 65535 ? port : null;
}

/**
 * A `host:port` listen as `baton nats-config --listen` takes it, split: `host` as written, `connect`
 * the address to reach it on (brackets off; a wildcard address is reached on 127.0.0.1), `port`.
 * Null when it is not one.
 */
function splitListen(listen) {
  if (typeof listen !== 'string') return null;
  const at = listen.lastIndexOf(':');
  if (at <= 0) return null;
  const host = listen.slice(0, at);
  const port = portOf(listen.slice(at + 1));
  const bracketed = host.startsWith('[') && host.endsWith(']') && host.length > 2;
  if (port === null || !(bracketed || !/[\s:[\]/]/.test(host))) return null;
  const bare = bracketed ? host.slice(1, -1) : host;
  const connect = ['0.0.0.0', '::'].includes(bare) ? '127.0.0.1' : bare;
  return { host, connect, port };
}

/** `nats://<connect>:<port>` for a listen {@link splitListen} split. */
function natsUrlOf({ connect, port }) {
  return `nats://${connect.includes(':') ? `[${connect}]` : connect}:${port}`;
}

/**
 * Where npm start's own nats-server listens, first of:
 * 1. `natsPort` (the NATS_PORT variable, already checked to be a port): 127.0.0.1 on it; in use, an
 *    error (`nats_port_in_use`), never another port;
 * 2. `confListen`, the listen the deployment folder's nats-server.conf names, when npm start did not
 *    write it itself (`recordedListen`, its note) and it is not the default 127.0.0.1:4222 — one set
 *    with `baton nats-config --listen` (or by hand): kept as it is, host and all; in use, an error
 *    (`nats_listen_in_use`);
 * 3. 127.0.0.1:4222 when it is free, else a free port on 127.0.0.1 (`freePort()`).
 * `inUse(host, port)` says whether something already listens there. Returns the listen to write,
 * how it was chosen (`from`: `NATS_PORT`, `nats-server.conf`, `default` or `free`), whether it is
 * npm start's own choice (`own`: noted, so a later start does not take it for someone's), and the
 * listen it replaces when NATS_PORT overrides one someone set (`replaces`).
 */
async function chooseNatsListen({ natsPort, confListen, recordedListen, confFile, inUse, freePort }) {
  const chosen = splitListen(confListen);
  const someones = chosen !== null && confListen !== DEFAULT_LISTEN && confListen !== recordedListen ? confListen : undefined;
  if (natsPort !== undefined) {
    const listen = `127.0.0.1:${natsPort}`;
    if (await inUse('127.0.0.1', natsPort)) {
      throw new NatsListenError(
        'nats_port_in_use',
        `NATS_PORT ${natsPort}: something already listens on ${listen} (another nats-server?); choose another port, or stop what holds it`,
      );
    }
    return { listen, ...splitListen(listen), from: 'NATS_PORT', own: true, ...(someones !== undefined && someones !== listen ? { replaces: someones } : {}) };
  }
  if (someones !== undefined) {
    if (await inUse(chosen.connect, chosen.port)) {
      throw new NatsListenError(
        'nats_listen_in_use',
        `${confFile ?? 'nats-server.conf'} listens on ${someones} (baton nats-config --listen), and something already listens there (another nats-server?): stop it, choose another port for this start with NATS_PORT, or another listen with baton nats-config --listen`,
      );
    }
    return { listen: someones, ...chosen, from: 'nats-server.conf', own: false };
  }
  if (!(await inUse('127.0.0.1', 4222))) return { listen: DEFAULT_LISTEN, ...splitListen(DEFAULT_LISTEN), from: 'default', own: true };
  const listen = `127.0.0.1:${await freePort()}`;
  return { listen, ...splitListen(listen), from: 'free', own: true };
}

/** The listen npm start noted it wrote itself into the deployment folder `dir`'s nats-server.conf (undefined: none). */
function recordedListen(dir) {
  try {
    const listen = JSON.parse(fs.readFileSync(path.join(dir, START_RECORD), 'utf8'))?.listen;
    return typeof listen === 'string' ? listen : undefined;
  } catch {
    return undefined;
  }
}

/** Note `listen` as npm start's own choice in the deployment folder `dir`. */
function recordListen(dir, listen) {
  fs.writeFileSync(path.join(dir, START_RECORD), `${JSON.stringify({ listen, written_by: 'npm start (scripts/start.js)' }, null, 2)}\n`);
}

module.exports = { DEFAULT_LISTEN, START_RECORD, NatsListenError, chooseNatsListen, natsUrlOf, portOf, recordListen, recordedListen, splitListen };
