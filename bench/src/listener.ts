// Which local process serves a URL: the one listening on its address and port. The bench reads
// nats-server's and redis-server's CPU from /proc/<pid>/stat, so it must account the server it
// talks to, not the first process of that name (with a second nats-server on the machine it once
// measured the wrong one). Linux: /proc/net/tcp{,6} gives the listening socket's inode,
// /proc/<pid>/fd/* links (`socket:[inode]`) give the process holding it; `ss -ltnp` when /proc
// cannot tell. When the process cannot be found, the answer says why instead of guessing.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { isIP } from 'node:net';
import { endianness, networkInterfaces } from 'node:os';

/** The process serving a URL, or why it is not known. */
export type ProcessLookup = { pid: number; via: 'proc' | 'ss'; reason?: undefined } | { pid: null; reason: string };

/** A listening TCP socket: its local address (normalised, see {@link normalizeAddress}), port and inode. */
export interface Listener {
  address: string;
  port: number;
  inode: number;
}

/** A listening socket as `ss -ltnp` shows it, with the pids holding it. */
export interface SsListener {
  address: string;
  port: number;
  pids: number[];
}

const V4_ANY = '0.0.0.0';
const V6_ANY = '0000:0000:0000:0000:0000:0000:0000:0000';
const TCP_LISTEN = '0A';

/** Expand an IPv6 address to eight 4-digit lowercase groups ("::1" → "0000:…:0001"); null if it is not one. */
export function expandIPv6(address: string): string | null {
  let text = address
    .replace(/^\[|\]$/g, '')
    .replace(/%.*$/, '')
    .toLowerCase();
  if (isIP(text) !== 6) return null;
  // An embedded IPv4 tail (::ffff:127.0.0.1) becomes two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head.length > 0 ? head.split(':') : [];
  const right = tail !== undefined && tail.length > 0 ? tail.split(':') : [];
  const missing = 8 - left.length - right.length;
  const groups = tail === undefined ? left : [...left, ...Array<string>(missing).fill('0'), ...right];
  return groups.map((g) => g.padStart(4, '0')).join(':');
}

/**
 * One spelling per address: IPv4 dotted ("127.0.0.1"), IPv4-mapped IPv6 as the IPv4 address,
 * other IPv6 as eight 4-digit groups. Null when `address` is not an IP address.
 */
export function normalizeAddress(address: string): string | null {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIP(bare) === 4) return bare;
  const expanded = expandIPv6(bare);
  if (expanded === null) return null;
  if (expanded.startsWith('0000:0000:0000:0000:0000:ffff:')) {
    const [hi = 0, lo = 0] = expanded
      .split(':')
      .slice(6)
      .map((g) => parseInt(g, 16));
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return expanded;
}

/** The bytes of one 32-bit word of /proc/net/tcp's address column, in network order. */
function wordBytes(hex: string, littleEndian: boolean): number[] {
  const word = parseInt(hex, 16) >>> 0;
  const bytes = [word >>> 24, (word >>> 16) & 255, (word >>> 8) & 255, word & 255];
  // The kernel prints each 32-bit word as a host-order integer: on little-endian hosts the bytes come reversed.
  return littleEndian ? bytes.reverse() : bytes;
}

/** Decode /proc/net/tcp's `0100007F` (IPv4) or 32-digit (IPv6) local address into a normalised address. */
export function decodeProcAddress(hex: string, littleEndian = endianness() === 'LE'): string | null {
  if (hex.length === 8) return wordBytes(hex, littleEndian).join('.');
  if (hex.length !== 32) return null;
  const bytes = [0, 8, 16, 24].flatMap((i) => wordBytes(hex.slice(i, i + 8), littleEndian));
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16).padStart(4, '0'));
  return normalizeAddress(groups.join(':'));
}

/** The sockets in LISTEN state in the text of /proc/net/tcp or /proc/net/tcp6. */
export function parseProcNetTcp(text: string, littleEndian = endianness() === 'LE'): Listener[] {
  const listeners: Listener[] = [];
  for (const line of text.split('\n')) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || !/^\d+:$/.test(fields[0] ?? '')) continue;
    if (fields[3] !== TCP_LISTEN) continue;
    const [hexAddress = '', hexPort = ''] = (fields[1] ?? '').split(':');
    const address = decodeProcAddress(hexAddress, littleEndian);
    const inode = Number(fields[9]);
    if (address === null || !/^[0-9A-Fa-f]{4}$/.test(hexPort) || !Number.isInteger(inode) || inode <= 0) continue;
    listeners.push({ address, port: parseInt(hexPort, 16), inode });
  }
  return listeners;
}

/** The inode of a `/proc/<pid>/fd/*` link target (`socket:[12345]`), or null for anything else. */
export function socketInode(link: string): number | null {
  const match = /^socket:\[(\d+)\]$/.exec(link);
  return match ? Number(match[1]) : null;
}

/** PPid from the text of /proc/<pid>/status, or null. */
export function parsePpid(status: string): number | null {
  const match = /^PPid:\s+(\d+)$/m.exec(status);
  return match ? Number(match[1]) : null;
}

/**
 * The listening sockets of `ss -ltnp` (with or without its header line), with the pids it shows
 * for each (none when ss may not see the owner).
 */
export function parseSsListeners(text: string): SsListener[] {
  const listeners: SsListener[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields[0] !== 'LISTEN' || fields.length < 5) continue;
    const local = fields[3] ?? '';
    const colon = local.lastIndexOf(':');
    const host = local.slice(0, colon);
    const port = Number(local.slice(colon + 1));
    const address = host === '*' ? V4_ANY : normalizeAddress(host);
    if (address === null || !Number.isInteger(port)) continue;
    const pids = [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
    listeners.push({ address, port, pids: [...new Set(pids)] });
    // `*:port` is every address of both families.
    if (host === '*') listeners.push({ address: V6_ANY, port, pids: [...new Set(pids)] });
  }
  return listeners;
}

/**
 * The sockets a connection to `target` (a normalised address) on `port` reaches, as the kernel
 * chooses: one bound to that exact address, else the wildcard of its family, else (IPv4) the
 * IPv6 wildcard, which accepts IPv4 too unless it is IPv6-only.
 */
export function listenersFor<L extends { address: string; port: number }>(listeners: readonly L[], port: number, target: string): L[] {
  const onPort = listeners.filter((l) => l.port === port);
  const tiers = target.includes('.') ? [target, V4_ANY, V6_ANY] : [target, V6_ANY];
  for (const address of tiers) {
    const hit = onPort.filter((l) => l.address === address);
    if (hit.length > 0) return hit;
  }
  return [];
}

/**
 * The one process among `pids` that is not a child of another of them (a server that forked a
 * child — redis-server saving a snapshot — shares its listening socket with it), or null when
 * there are several or none.
 */
export function rootProcess(pids: readonly number[], ppidOf: (pid: number) => number | null): number | null {
  const unique = [...new Set(pids)];
  const roots = unique.filter((pid) => !unique.includes(ppidOf(pid) ?? -1));
  return roots.length === 1 ? (roots[0] as number) : null;
}

/** The host and port of a server URL (`nats://127.0.0.1:4222`, `redis://h:6379/0`, `127.0.0.1:4222`). */
export function hostPortOf(url: string, defaultPort: number): { host: string; port: number } | { reason: string } {
  if (url.includes(',')) return { reason: `${url} names several servers; the bench can account one local server only` };
  try {
    const parsed = new URL(url.includes('://') ? url : `tcp://${url}`);
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    const port = parsed.port === '' ? defaultPort : Number(parsed.port);
    return { host, port };
  } catch {
    return { reason: `cannot parse ${url} as a server URL` };
  }
}

/** The addresses a host name stands for without asking DNS: IP literals and `localhost`; null otherwise. */
export function literalAddresses(host: string): string[] | null {
  if (host === 'localhost') return ['127.0.0.1', normalizeAddress('::1') as string];
  const address = normalizeAddress(host);
  return address === null ? null : [address];
}

/** True for loopback addresses and the addresses of this machine's interfaces. */
export function isLocalAddress(address: string): boolean {
  if (address.startsWith('127.') || address === normalizeAddress('::1') || address === V4_ANY || address === V6_ANY) return true;
  return Object.values(networkInterfaces()).some((list) => (list ?? []).some((nic) => normalizeAddress(nic.address) === address));
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** Every pid whose open files include one of `inodes`, and how many processes' fds could not be read. */
function holdersOf(inodes: ReadonlySet<number>, procRoot: string): { holders: Map<number, number[]>; unreadable: number } {
  const holders = new Map<number, number[]>();
  let unreadable = 0;
  let entries: string[] = [];
  try {
    entries = readdirSync(procRoot);
  } catch {
    return { holders, unreadable: 0 };
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`${procRoot}/${entry}/fd`);
    } catch {
      unreadable++; // another user's process, or it exited
      continue;
    }
    for (const fd of fds) {
      let inode: number | null = null;
      try {
        inode = socketInode(readlinkSync(`${procRoot}/${entry}/fd/${fd}`));
      } catch {
        // the fd closed meanwhile
      }
      if (inode !== null && inodes.has(inode)) holders.set(inode, [...(holders.get(inode) ?? []), Number(entry)]);
    }
  }
  return { holders, unreadable };
}

function ppidFrom(procRoot: string): (pid: number) => number | null {
  return (pid) => {
    const status = readText(`${procRoot}/${pid}/status`);
    return status === null ? null : parsePpid(status);
  };
}

/** Run `ss -ltnp` (null when it is not installed or fails). */
function runSs(): string | null {
  try {
    return execFileSync('ss', ['-ltnp'], { encoding: 'utf8', timeout: 5_000, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return null;
  }
}

/** Where {@link findListeningProcess} reads from; tests may point it elsewhere. */
export interface LookupSources {
  /** Default `/proc`. */
  procRoot?: string;
  /** `ss -ltnp` output, or null when ss is unavailable (default: run it). */
  ss?: () => string | null;
}

/**
 * The process listening where `url` connects (its host must be an IP address or `localhost`, on
 * this machine), found through /proc, else through `ss -ltnp`. Never a guess: when no single
 * process can be named, the answer is `{ pid: null, reason }`.
 */
export function findListeningProcess(url: string, defaultPort: number, sources: LookupSources = {}): ProcessLookup {
  const procRoot = sources.procRoot ?? '/proc';
  const ss = sources.ss ?? runSs;
  const target = hostPortOf(url, defaultPort);
  if ('reason' in target) return { pid: null, reason: target.reason };
  const { host, port } = target;
  const where = `${host}:${port}`;
  const addresses = literalAddresses(host);
  if (addresses === null)
    return { pid: null, reason: `${url}: host ${host} is a name; give the bench an IP address (or localhost) so it can find the server's process` };
  if (!addresses.some(isLocalAddress)) return { pid: null, reason: `${where} is not on this machine: its CPU cannot be read here` };

  const ppidOf = ppidFrom(procRoot);
  const pick = (pidsPerAddress: number[][], via: 'proc' | 'ss'): ProcessLookup => {
    const roots = [...new Set(pidsPerAddress.map((pids) => rootProcess(pids, ppidOf)))];
    if (roots.length === 1 && roots[0] !== null && roots[0] !== undefined) return { pid: roots[0], via };
    const all = [...new Set(pidsPerAddress.flat())].sort((a, b) => a - b);
    return { pid: null, reason: `${where}: several processes listen (pids ${all.join(', ')}); cannot tell which one the bench talks to` };
  };

  // 1. /proc/net/tcp{,6}: the listening socket's inode, then the process holding it.
  const tables = [readText(`${procRoot}/net/tcp`), readText(`${procRoot}/net/tcp6`)].filter((t): t is string => t !== null);
  let procReason: string | null = null;
  if (tables.length > 0) {
    const listeners = tables.flatMap((t) => parseProcNetTcp(t));
    const perAddress = addresses.map((a) => listenersFor(listeners, port, a)).filter((l) => l.length > 0);
    if (perAddress.length === 0) return { pid: null, reason: `no process listens on ${where}` };
    const inodes = new Set(perAddress.flat().map((l) => l.inode));
    const { holders, unreadable } = holdersOf(inodes, procRoot);
    const pidsPerAddress = perAddress.map((list) => list.flatMap((l) => holders.get(l.inode) ?? []));
    if (pidsPerAddress.every((pids) => pids.length > 0)) return pick(pidsPerAddress, 'proc');
    procReason = `the socket listening on ${where} (inode ${[...inodes].join(', ')}) belongs to no process this user can see (${unreadable} processes' /proc/<pid>/fd unreadable)`;
  }

  // 2. ss -ltnp (it needs the same rights to name other users' processes, but works where /proc/net does not).
  const ssText = ss();
  if (ssText === null) return { pid: null, reason: procReason ?? 'cannot list listening sockets: no /proc/net/tcp and no ss' };
  const perAddress = addresses.map((a) => listenersFor(parseSsListeners(ssText), port, a)).filter((l) => l.length > 0);
  if (perAddress.length === 0) return { pid: null, reason: procReason ?? `no process listens on ${where}` };
  const pidsPerAddress = perAddress.map((list) => list.flatMap((l) => l.pids));
  if (pidsPerAddress.some((pids) => pids.length === 0)) {
    return { pid: null, reason: procReason ?? `ss shows a listener on ${where} but not its process (run the bench as the server's user)` };
  }
  return pick(pidsPerAddress, 'ss');
}
