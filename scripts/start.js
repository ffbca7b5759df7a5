#!/usr/bin/env node
// `npm start`: run a nats-server of its own with authentication (credentials under var/nats-auth)
// unless NATS_URL names one (on NATS_PORT, else on the listen `baton nats-config --listen` set,
// else on 4222 or, when that is taken, a free port: scripts/nats-listen.js), make sure Redis is
// reachable (starting a local redis-server with its data under ./var when it is not), then run the
// four Baton services as separate processes until Ctrl-C. On a terminal their JSON log lines are
// shown readably (LOG_FORMAT=json keeps the JSON). Its nats-server logs to var/nats-server.log;
// its errors and warnings, and each configuration reload, are shown here too, as is what
// `baton nats-config` warns of (`[start] warning (<code>)`).
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const { natsConfigWarningLines } = require('./nats-config-warnings');
const { NatsListenError, chooseNatsListen, natsUrlOf, portOf: asPort, recordListen, recordedListen } = require('./nats-listen');
const { enableAccountJetStream } = require('./nats-account');
const { natsLogLineShown } = require('./nats-log-lines');

const root = path.resolve(__dirname, '..');
const redisUrl = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
/** REDIS_URL as npm start prints it: a password in it (redis://:<password>@host) shown as ***. */
const redisShown = (() => {
  const shown = new URL(redisUrl.href);
  if (shown.password) shown.password = '***';
  return shown.href;
})();
const services = [
  { name: 'ledger', port: 7102 },
  { name: 'router', port: 7101 },
  { name: 'watchdog', port: 7103 },
  { name: 'notifier', port: 7100 },
];

/**
 * npm start's own variable for a service's HTTP port (NOTIFIER_HTTP_PORT…): read here and passed
 * to that service as HTTP_PORT, never down as it is — the service reads no such variable of its
 * own prefix and would warn that it ignores it.
 */
const portVariable = (name) => `${name.toUpperCase()}_HTTP_PORT`;

/** Each service's HTTP port: its <SERVICE>_HTTP_PORT, else its default (checked before anything starts). */
for (const service of services) {
  const given = process.env[portVariable(service.name)];
  if (given === undefined || given === '') continue;
  if (!/^\d{1,5}$/.test(given) || Number(given) < 1 || Number(given) > 65535) {
    console.error(`[start] ${portVariable(service.name)} must be a port from 1 to 65535, got "${given}"`);
    process.exit(1);
  }
  service.port = Number(given);
}
/**
 * NATS_PORT: the port npm start's own nats-server listens on (127.0.0.1), instead of 4222 or a free
 * one; taken or not a port, npm start stops before anything starts (chooseNatsListen).
 */
const natsPortGiven = process.env.NATS_PORT === undefined || process.env.NATS_PORT === '' ? undefined : process.env.NATS_PORT;
const natsPort = natsPortGiven === undefined ? undefined : asPort(natsPortGiven);
if (natsPort === null) {
  console.error(`[start] NATS_PORT must be a port from 1 to 65535, got "${natsPortGiven}"`);
  process.exit(1);
}
if (natsPort !== undefined && process.env.NATS_URL) {
  console.error(`[start] NATS_PORT is the port of npm start's own nats-server, which it does not run with NATS_URL set (${process.env.NATS_URL}): unset one of them`);
  process.exit(1);
}
const portOf = (name) => services.find((service) => service.name === name).port;
/** The operator API's URL: the notifier's port on HTTP_HOST, unless that is every interface. */
const apiHost = !process.env.HTTP_HOST || ['0.0.0.0', '::'].includes(process.env.HTTP_HOST) ? '127.0.0.1' : process.env.HTTP_HOST;
const api = `http://${apiHost.includes(':') ? `[${apiHost}]` : apiHost}:${portOf('notifier')}`;

function reachable(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port: Number(port) });
    socket.setTimeout(1000);
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => { socket.destroy(); resolve(false); });
  });
}

function onPath(bin) {
  for (const dir of (process.env.PATH || '').split(path.delimiter).concat(['/usr/sbin', '/usr/local/sbin'])) {
    const file = path.join(dir, bin);
    if (fs.existsSync(file)) return file;
  }
  return null;
}

async function waitFor(host, port, what) {
  for (let i = 0; i < 100; i++) {
    if (await reachable(host, port)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up on ${host}:${port}`);
}

// Processes this script started: the servers (nats-server, redis-server) and the four services.
const servers = [];
const serviceChildren = [];

/**
 * NATS for the platform. With NATS_URL set, that server is used: the services present the
 * credentials in BATON_NATS_DIR (default var/nats-auth; `baton nats-config` makes them), or none
 * when BATON_NATS_AUTH=none says the server runs without authentication (development only).
 * Without NATS_URL, start's own nats-server runs with authentication: `baton nats-config` makes
 * the operator, account and per-service credentials under var/nats-auth (kept between runs) and the
 * server trusts only them. The CLI and `npm run demo` find it through var/nats-auth/local.json.
 */
const natsDir = path.resolve(root, process.env.BATON_NATS_DIR || path.join('var', 'nats-auth'));
const serviceEnv = {};

/**
 * The subject prefix the services run with: BATON_PREFIX as they read it (the platform's config, its
 * default when unset). local.json names it and the banner prints it: the CLI in another shell takes
 * it from local.json, a client elsewhere needs BATON_PREFIX set to it.
 */
function servicesPrefix() {
  const { BaseConfigSchema, loadConfig } = require(path.join(root, 'dist', 'libs', 'platform', 'src'));
  return loadConfig(BaseConfigSchema.pick({ BATON_PREFIX: true }), process.env).BATON_PREFIX;
}

let tokenKey = null;
/**
 * The deployment's token key file: BATON_TOKEN_KEY_FILE, else <natsDir>/token.key, made once (0600)
 * by the same function `baton nats-config` makes it with. The notifier trusts only operator API
 * token records signed with it, and the CLI signs with it (local.json names it).
 */
function tokenKeyFile() {
  if (tokenKey !== null) return tokenKey;
  if (process.env.BATON_TOKEN_KEY_FILE) return (tokenKey = path.resolve(process.env.BATON_TOKEN_KEY_FILE));
  const { ensureTokenKeyFile } = require(path.join(root, 'dist', 'libs', 'platform', 'src', 'auth', 'token-key.js'));
  return (tokenKey = ensureTokenKeyFile(natsDir).key.file);
}

/** `baton <args>` (the built CLI), run to its end: its stdout and stderr; a failure is thrown. */
function batonCli(args) {
  const result = spawnSync(process.execPath, [path.join(root, 'dist', 'apps', 'cli', 'src', 'main.js'), ...args], { cwd: root, encoding: 'utf8', env: { ...process.env, BATON_NATS_DIR: natsDir } });
  if (result.status !== 0) throw new Error(`baton ${args[0]} failed: ${result.stderr || result.stdout}`);
  return { stdout: result.stdout, stderr: result.stderr };
}

/**
 * `baton nats-config --dir <natsDir> <args> --json`: its summary, and its warnings shown on this
 * terminal as `[start] warning (<code>): …` (a nats-server.conf whose settings it could not read,
 * a store_dir it moved…; `ownServer`: see natsConfigWarningLines).
 */
function natsConfig(args, { ownServer }) {
  const { stdout, stderr } = batonCli(['nats-config', '--dir', natsDir, ...args, '--json']);
  const summary = JSON.parse(stdout);
  for (const line of natsConfigWarningLines(stderr, summary, { ownServer })) console.error(line);
  return summary;
}

/** A port of 127.0.0.1 nothing listens on now (the system's pick). */
function freeLocalPort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function ensureNats() {
  if (process.env.NATS_URL) {
    const url = new URL(process.env.NATS_URL.split(',')[0]);
    if (!(await reachable(url.hostname, url.port || '4222'))) {
      console.error(`NATS is not reachable at ${process.env.NATS_URL}. Unset NATS_URL and npm start runs its own nats-server.`);
      process.exit(1);
    }
    if (process.env.BATON_NATS_AUTH === 'none') {
      console.warn('[start] BATON_NATS_AUTH=none: the services connect WITHOUT credentials (development server only)');
      return;
    }
    const summary = natsConfig([], { ownServer: false });
    for (const service of services) serviceEnv[service.name] = { NATS_CREDS: summary.creds[service.name] };
    console.log(`[start] using NATS at ${process.env.NATS_URL} with the credentials in ${natsDir} (the server must trust that operator: ${summary.server_config})`);
    return;
  }
  // Another `npm start` of this checkout is running (its local.json names a server that answers):
  // starting a second one would rewrite the deployment's server config and share its store.
  const running = readLocal();
  if (running !== null) {
    const at = new URL(running.url);
    if (await reachable(at.hostname, at.port)) {
      console.error(`[start] error (already_running): the platform of this checkout is already running (NATS at ${running.url}, ${path.join(natsDir, 'local.json')}); stop it first`);
      process.exit(1);
    }
  }
  const bin = onPath('nats-server');
  if (!bin) {
    console.error('nats-server is not on the PATH. Install it (https://docs.nats.io, Debian: apt-get install nats-server),');
    console.error('or set NATS_URL to a NATS server with JetStream (and NATS_CREDS / BATON_NATS_DIR for its credentials).');
    process.exit(1);
  }
  // Where it listens: NATS_PORT, else a listen someone set in the folder's nats-server.conf, else
  // 4222 or a free port (chooseNatsListen). The file is read with nats-config's own reader.
  const confFile = path.join(natsDir, 'nats-server.conf');
  // Where its nats-server keeps the JetStream data: var/nats, or BATON_NATS_STORE (another disk).
  const store = path.resolve(root, process.env.BATON_NATS_STORE || path.join('var', 'nats'));
  // As the messages name it: relative inside the checkout, whole outside it.
  const storeShown = path.relative(root, store).startsWith('..') ? store : path.relative(root, store);
  // A nats-server already on this store (one started by hand from the configuration for a restore,
  // an orphan of an earlier start): a second one would corrupt it, whatever port each listens on.
  const { natsServerOnStore } = require(path.join(root, 'dist', 'libs', 'eventstore', 'src', 'auth', 'store-holder.js'));
  const holder = natsServerOnStore({ store, confFile });
  if (holder !== null) {
    console.error(
      `[start] error (store_in_use): a nats-server (pid ${holder.pid}: ${holder.args.join(' ')}) already runs on this deployment's JetStream store (${storeShown}); two servers on one store corrupt it. Stop it first (kill ${holder.pid}), then start again`,
    );
    process.exit(1);
  }
  const { readServerConfigSettings } = require(path.join(root, 'dist', 'libs', 'eventstore', 'src', 'auth', 'deployment.js'));
  // The deployment folder (BATON_NATS_DIR: another checkout's?) keeps its data in a store with
  // streams, and this checkout's holds none: starting would show an empty deployment, its history
  // out of sight (and the next nats-config would point the folder at the empty store).
  const { storeLeftBehind } = require(path.join(root, 'dist', 'libs', 'eventstore', 'src', 'auth', 'store-holder.js'));
  const leftBehind = process.env.BATON_START_EMPTY_STORE === '1' ? null : storeLeftBehind({ from: readServerConfigSettings(confFile)?.storeDir, to: store });
  if (leftBehind !== null) {
    console.error(
      `[start] error (store_left_behind): the deployment's nats-server.conf (${confFile}) keeps its JetStream data in ${leftBehind.from} (${leftBehind.streams.length} streams: ${leftBehind.streams.join(', ')}), ` +
        `but npm start of this checkout would start its nats-server on ${storeShown}, which holds none: the deployment would start empty, its history out of sight. ` +
        `Stop the platform of that checkout and copy its whole var/ here (the deployment folder and the store), or start it in its own checkout; BATON_START_EMPTY_STORE=1 starts on the empty store anyway`,
    );
    process.exit(1);
  }
  let nats;
  try {
    nats = await chooseNatsListen({
      natsPort,
      confListen: readServerConfigSettings(confFile)?.listen,
      recordedListen: recordedListen(natsDir),
      confFile,
      inUse: reachable,
      freePort: freeLocalPort,
    });
  } catch (error) {
    if (!(error instanceof NatsListenError)) throw error;
    console.error(`[start] error (${error.code}): ${error.message}`);
    process.exit(1);
  }
  if (nats.replaces !== undefined) console.log(`[start] NATS_PORT ${natsPort}: nats-server listens on ${nats.listen}, not on ${nats.replaces} (the listen ${confFile} named)`);
  fs.mkdirSync(store, { recursive: true });
  const summary = natsConfig(['--listen', nats.listen, '--store-dir', store], { ownServer: true });
  // A listen npm start chose itself is noted, so that a later start does not keep it as someone's.
  if (nats.own) recordListen(natsDir, nats.listen);
  const chosenBy = {
    NATS_PORT: ' (NATS_PORT)',
    'nats-server.conf': ' (the listen baton nats-config --listen set)',
    default: '',
    free: ' (4222 is in use: a free port; NATS_PORT chooses one)',
  }[nats.from];
  console.log(
    `[start] starting nats-server with JetStream and authentication on ${nats.listen}${chosenBy} (config ${summary.server_config}, data in ${storeShown}, log ${path.relative(root, natsLog)})`,
  );
  const child = spawn(bin, ['-c', summary.server_config], { stdio: ['ignore', 'pipe', 'pipe'] });
  logNatsServer(child);
  servers.push(child);
  // Its nats-server exiting while the platform runs (killed, crashed, stopped by hand) stops the
  // platform, as a service exiting does: npm start is no supervisor, and a server it restarted
  // behind the services' backs would hide why it went. The services' reconnect attempts in the
  // meantime are logged by each (`NATS connection lost`).
  child.on('exit', (code, signal) => {
    if (stopping) return;
    console.error(
      `[start] error (nats_server_exited): its nats-server (pid ${child.pid}) exited (${signal ? `signal ${signal}` : `code ${code}`}); its log: ${natsLog}; stopping the platform`,
    );
    shutdown(1);
  });
  try {
    await waitFor(nats.connect, nats.port, 'nats-server');
  } catch (error) {
    throw new Error(`${error.message} (its log: ${natsLog})`);
  }
  const url = natsUrlOf(nats);
  // One connection first, alone: the server enables the account's JetStream on it, not on four
  // services connecting at once (a fresh store's `[ERR] Error configuring jetstream`: nats-account.js).
  await enableAccountJetStream(root, { url, creds: summary.creds.admin, prefix: summary.prefix }).catch((error) =>
    console.error(`[start] warning (nats_first_connection): the admin's first connection to ${url} failed: ${error.message}; starting the services anyway`),
  );
  for (const service of services) serviceEnv[service.name] = { NATS_URL: url, NATS_CREDS: summary.creds[service.name] };
  // The Redis the services use too: the CLI reads projections there (unless REDIS_URL says otherwise).
  // The server's pid and log: `baton creds revoke` names them (reload it, read the log).
  // (natsDir is 0700: a password in REDIS_URL is kept there as the credentials are.)
  // The services' prefix too: the CLI takes it from here when BATON_PREFIX is not set (the prefix the
  // admin's credentials were issued for: nats-config's, which reads BATON_PREFIX as the services do).
  writtenLocal = `${JSON.stringify({ url, creds: summary.creds, prefix: summary.prefix, redis: redisUrl.href, api, token_key: tokenKeyFile(), nats_server: { pid: child.pid, log: natsLog } }, null, 2)}\n`;
  fs.writeFileSync(path.join(natsDir, 'local.json'), writtenLocal);
  console.log(
    `[start] the baton CLI and npm run demo connect as admin through ${path.join(natsDir, 'local.json')} (prefix ${summary.prefix}); agents get credentials with: npx baton creds agent --project <p> --agent <name>`,
  );
}

/**
 * Where npm start's nats-server logs (appended to, a line marking each start): a reload it refused
 * (`Failed to reload server configuration`, after a revocation say) is written there, and, with its
 * other errors and warnings and each reload it applied, shown on this terminal as `[nats]`.
 */
const natsLog = path.join(root, 'var', 'nats-server.log');

function logNatsServer(child) {
  fs.mkdirSync(path.dirname(natsLog), { recursive: true });
  const file = fs.createWriteStream(natsLog, { flags: 'a' });
  file.on('error', (error) => console.error(`[start] cannot write ${natsLog}: ${error.message}`));
  file.write(`--- npm start ${new Date().toISOString()}: nats-server pid ${child.pid}\n`);
  const prefix = '[nats]'.padEnd(11);
  // Shared by stdout and stderr: once the server says it shuts down, its advisories' warnings are left out (nats-log-lines.js).
  const shown = {};
  let open = 2;
  for (const stream of [child.stdout, child.stderr]) {
    let buffer = '';
    stream.on('data', (chunk) => {
      buffer += chunk;
      file.write(chunk);
      let index;
      while ((index = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, index);
        buffer = buffer.slice(index + 1);
        const where = natsLogLineShown(line, shown);
        if (where === 'error') console.error(`${prefix} ${line}`);
        else if (where === 'log') console.log(`${prefix} ${line}`);
      }
    });
    stream.on('end', () => {
      if (--open === 0) file.end();
    });
  }
}

async function ensureRedis() {
  const host = redisUrl.hostname, port = redisUrl.port || '6379';
  if (await reachable(host, port)) return;
  const bin = onPath('redis-server');
  if (!bin || !['127.0.0.1', 'localhost'].includes(host)) {
    console.error(`Redis is not reachable at ${redisShown}.`);
    console.error('Install redis-server (Debian: apt-get install redis-server) and run:');
    console.error(`  redis-server --port ${port} --appendonly yes --dir ./var/redis${redisUrl.password ? ' (with requirepass set to the password of REDIS_URL)' : ''}`);
    console.error('or set REDIS_URL.');
    // The nats-server it may have started stops with it.
    return shutdown(1);
  }
  const dir = path.join(root, 'var', 'redis');
  fs.mkdirSync(dir, { recursive: true });
  // A password in REDIS_URL (redis://:<password>@127.0.0.1:6379) is the server's requirepass, given on
  // its standard input (`-`: read configuration from stdin), not its command line, which every local
  // user can read. Without one, the server is loopback-only and open to every local user.
  const password = redisUrl.password ? decodeURIComponent(redisUrl.password) : '';
  console.log(
    `[start] starting redis-server on ${host}:${port} (data in var/redis; ${password ? 'password from REDIS_URL' : 'no password: any local user can read and write it — put one in REDIS_URL, redis://:<password>@127.0.0.1:6379'})`,
  );
  const child = spawn(bin, ['--bind', '127.0.0.1', '--port', String(port), '--appendonly', 'yes', '--dir', dir, ...(password ? ['-'] : [])], {
    stdio: [password ? 'pipe' : 'ignore', 'ignore', 'ignore'],
  });
  if (password) child.stdin.end(`requirepass ${JSON.stringify(password)}\n`);
  servers.push(child);
  await waitFor(host, port, 'redis-server');
}

function build() {
  if (process.env.BATON_SKIP_BUILD === '1') return;
  console.log('[start] building (swc)');
  const result = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit', env: { ...process.env, NX_DAEMON: 'false' } });
  if (result.status !== 0) process.exit(result.status || 1);
}

// The Node flags each service is measured and deployed with (heap sizes per service).
const SERVICE_NODE_OPTIONS = require('../infra/service-node-options.json').services;

const { readableLogLine } = require('./log-format');

/** A service's log line as `npm start` prints it: readable on a terminal unless LOG_FORMAT=json. */
function readable(line, out) {
  return readableLogLine(line, { terminal: Boolean(out.isTTY), format: process.env.LOG_FORMAT });
}

function runService({ name, port }) {
  const entry = path.join(root, 'dist', 'apps', name, 'src', 'main.js');
  const env = {
    // The heap settings the service is measured and deployed with (infra/service-node-options.json,
    // docs/performance.md); a NODE_OPTIONS of your own replaces them.
    NODE_OPTIONS: SERVICE_NODE_OPTIONS[name],
    ...process.env,
    ...serviceEnv[name],
    // Each service its own port: <SERVICE>_HTTP_PORT, else its default — never a plain HTTP_PORT
    // from this shell, which would give all four the same one.
    HTTP_PORT: String(port),
  };
  // npm start's variables, not the services': they read HTTP_PORT (and NATS_URL).
  for (const service of services) delete env[portVariable(service.name)];
  delete env.NATS_PORT;
  const child = spawn(process.execPath, ['--enable-source-maps', entry], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const prefix = `[${name}]`.padEnd(11);
  const pipe = (stream, out) => {
    let buffer = '';
    stream.on('data', (chunk) => {
      buffer += chunk;
      let index;
      while ((index = buffer.indexOf('\n')) >= 0) {
        out.write(`${prefix} ${readable(buffer.slice(0, index), out)}\n`);
        buffer = buffer.slice(index + 1);
      }
    });
  };
  pipe(child.stdout, process.stdout);
  pipe(child.stderr, process.stderr);
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`${prefix} exited (${signal || code}); stopping the platform`);
      shutdown(1);
    }
  });
  serviceChildren.push(child);
}

/** What this process wrote to local.json (null: nothing): only that is removed at exit. */
let writtenLocal = null;

/** The running platform's local.json ({ url, creds }), or null when there is none or it cannot be read. */
function readLocal() {
  try {
    const parsed = JSON.parse(fs.readFileSync(path.join(natsDir, 'local.json'), 'utf8'));
    return typeof parsed?.url === 'string' ? parsed : null;
  } catch {
    return null;
  }
}

process.on('exit', () => {
  // Only the file this process wrote: a second `npm start` that gave up must not take the running
  // platform's away from the CLI and the demo.
  const local = path.join(natsDir, 'local.json');
  try {
    if (writtenLocal !== null && fs.readFileSync(local, 'utf8') === writtenLocal) fs.rmSync(local);
  } catch {
    // already gone
  }
});

// How long a process may take to stop after SIGTERM (a service drains its consumers and closes its
// connections) before it is killed.
const STOP_GRACE_MS = 20_000;

/** SIGTERM, then wait for the exit (SIGKILL after the grace period). */
function stopChild(child, what) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      console.error(`[start] ${what} did not stop within ${STOP_GRACE_MS / 1000} s; killing it`);
      child.kill('SIGKILL');
    }, STOP_GRACE_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

let stopping = false;
/**
 * Stop the services first and wait until each has exited (they still need NATS and Redis to stop
 * cleanly), then the servers this script started, then exit: nothing is left running behind us.
 */
async function shutdown(code = 0) {
  if (stopping) return;
  stopping = true;
  await Promise.all(serviceChildren.map((child) => stopChild(child, `service pid ${child.pid}`)));
  await Promise.all(servers.map((child) => stopChild(child, `server pid ${child.pid}`)));
  process.exit(code);
}

(async () => {
  build();
  await ensureNats();
  // The notifier trusts only token records signed with the deployment's key (unless BATON_TOKEN_KEY_FILE names another).
  serviceEnv.notifier = { ...serviceEnv.notifier, BATON_TOKEN_KEY_FILE: tokenKeyFile() };
  console.log(`[start] operator API tokens are signed with ${tokenKeyFile()} (baton token create finds it through local.json, else BATON_TOKEN_KEY_FILE)`);
  await ensureRedis();
  for (const service of services) runService(service);
  const prefix = servicesPrefix();
  console.log(
    `[start] Baton is starting (BATON_PREFIX=${prefix}): operator API and inbox on ${api}; health and metrics: ${services.map(({ name, port }) => `${name} ${port}`).join(', ')} (Ctrl-C stops)`,
  );
  // Without local.json (NATS_URL given) the CLI in another shell reads BATON_PREFIX alone: one not the default must be given to it.
  if (writtenLocal === null && prefix !== 'baton') console.log(`[start] the services run with BATON_PREFIX=${prefix}: give it to the baton CLI and npm run demo`);
  // The CLI (answer, answer-hold, decide, abandon) and npm run demo call the operator API at
  // BATON_API_URL, else the one local.json names, else http://127.0.0.1:7100: without local.json
  // (NATS_URL given) they need to be told where it moved.
  if (writtenLocal === null && api !== 'http://127.0.0.1:7100' && (process.env.BATON_API_URL || '').replace(/\/+$/, '') !== api) {
    console.log(`[start] the operator API is not at the default http://127.0.0.1:7100: give the baton CLI and npm run demo BATON_API_URL=${api}`);
  }
  process.on('SIGINT', () => shutdown(0));
  process.on('SIGTERM', () => shutdown(0));
})().catch((error) => {
  console.error(`[start] ${error.message}`);
  shutdown(1);
});
