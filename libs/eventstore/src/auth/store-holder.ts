import { readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, isAbsolute, resolve } from 'node:path';

/*
 * Two nats-servers on one JetStream store corrupt it: each keeps its own view of the files the other
 * writes. `npm start` starts a nats-server on the checkout's store (var/nats) from the deployment
 * folder's configuration; an SRE restoring a backup starts that same server by hand
 * (`nats-server -c var/nats-auth/nats-server.conf`) and may leave it running. Before it starts its
 * own, npm start asks whether a nats-server already runs on the store or from the configuration —
 * read from each process's command line in /proc (relative paths resolved against the process's
 * working folder), so it finds a server whatever port it listens on.
 */

/** A running nats-server holding a store: its pid and command line. */
export interface StoreHolder {
  pid: number;
  args: string[];
}

const STORE_FLAGS = new Set(['-sd', '--sd', '-store_dir', '--store_dir']);
const CONFIG_FLAGS = new Set(['-c', '--c', '-config', '--config']);

/** `path` made absolute and real (links resolved) where it exists, else just absolute. */
function canonical(path: string, from = process.cwd()): string {
  const absolute = isAbsolute(path) ? path : resolve(from, path);
  try {
    return realpathSync(absolute);
  } catch {
    return absolute;
  }
}

/**
 * The running nats-server (other than this process) whose command line names `store` as its
 * JetStream store (`-sd`, `--store_dir`) or `confFile` as its configuration (`-c`, `--config`; the
 * configuration names the store), or null when none does — and null where there is no /proc to read
 * (not Linux): the check is then not made.
 */
export function natsServerOnStore(paths: { store: string; confFile: string }, procRoot = '/proc'): StoreHolder | null {
  let pids: string[];
  try {
    pids = readdirSync(procRoot).filter((name) => /^\d+$/.test(name));
  } catch {
    return null;
  }
  const store = canonical(paths.store);
  const confFile = canonical(paths.confFile);
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    let args: string[];
    let cwd: string;
    try {
      args = readFileSync(`${procRoot}/${pid}/cmdline`, 'utf8')
        .split('\0')
        .filter((arg) => arg !== '');
      if (!args.slice(0, 2).some((arg) => basename(arg) === 'nats-server')) continue;
      cwd = readlinkSync(`${procRoot}/${pid}/cwd`);
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    for (let i = 0; i < args.length; i++) {
      const [flag, inline] = (args[i] as string).split('=', 2) as [string, string | undefined];
      const value = inline ?? args[i + 1];
      if (value === undefined) continue;
      if (STORE_FLAGS.has(flag) && canonical(value, cwd) === store) return { pid: Number(pid), args };
      if (CONFIG_FLAGS.has(flag) && canonical(value, cwd) === confFile) return { pid: Number(pid), args };
    }
  }
  return null;
}

/**
 * The JetStream streams a nats-server store folder holds, as `<account>/<stream>`, sorted: the
 * folders of `<store>/jetstream/<account>/streams/` (the layout nats-server keeps on disk). Empty
 * when the folder does not exist or holds none.
 */
export function streamsIn(store: string): string[] {
  const found: string[] = [];
  const root = resolve(store, 'jetstream');
  let accounts: string[];
  try {
    accounts = readdirSync(root);
  } catch {
    return found;
  }
  for (const account of accounts) {
    try {
      for (const entry of readdirSync(resolve(root, account, 'streams'), { withFileTypes: true }))
        if (entry.isDirectory()) found.push(`${account}/${entry.name}`);
    } catch {
      // not an account folder
    }
  }
  return found.sort();
}

/** The deployment's data would be left behind: see {@link storeLeftBehind}. */
export interface StoreLeftBehind {
  /** The store the deployment's configuration named, which holds streams. */
  from: string;
  /** The store npm start is about to start its nats-server on, which holds none. */
  to: string;
  /** What `from` holds (`<account>/<stream>`). */
  streams: string[];
}

/**
 * Whether starting a nats-server on `to` would leave the deployment's data behind: its
 * configuration names another store (`from`: the `store_dir` of its nats-server.conf — a
 * deployment folder of another checkout, given through BATON_NATS_DIR) that holds streams, while
 * `to` holds none. The platform would start on an empty store, as if new, with the other store's
 * history out of sight; null when not (same folder, nothing there, or `to` has streams of its own).
 */
export function storeLeftBehind(paths: { from: string | undefined; to: string }): StoreLeftBehind | null {
  if (paths.from === undefined) return null;
  const from = canonical(paths.from);
  const to = canonical(paths.to);
  if (from === to) return null;
  const streams = streamsIn(from);
  if (streams.length === 0 || streamsIn(to).length > 0) return null;
  return { from, to, streams };
}
