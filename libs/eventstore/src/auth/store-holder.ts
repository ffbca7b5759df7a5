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
