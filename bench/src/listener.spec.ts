import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  decodeProcAddress,
  expandIPv6,
  findListeningProcess,
  hostPortOf,
  listenersFor,
  normalizeAddress,
  parseProcNetTcp,
  parsePpid,
  parseSsListeners,
  rootProcess,
  socketInode,
} from './listener';

// Lines as a little-endian Linux host prints them (header, then LISTEN and ESTABLISHED sockets).
const PROC_NET_TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:107E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4631 1 000000005c1bcf2f 100 0 0 10 0
   2: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3100 1 0000000000000000 100 0 0 10 0
   3: 0100007F:107E 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 21055 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:C35A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21002 1 0000000000000000 100 0 0 10 0
`;
const PROC_NET_TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:18EB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4632 1 000000003cc825bd 100 0 0 10 0
   1: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3200 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:C35B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3300 1 0000000000000000 100 0 0 10 0
`;
const SS = `State  Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess
LISTEN 0      511        127.0.0.1:6379       0.0.0.0:*    users:(("redis-server",pid=2217,fd=6),("redis-server",pid=4410,fd=6))
LISTEN 0      4096       127.0.0.1:4222       0.0.0.0:*    users:(("nats-server",pid=2957,fd=7))
LISTEN 0      4096       127.0.0.1:50010      0.0.0.0:*    users:(("nats-server",pid=5001,fd=7))
LISTEN 0      128          0.0.0.0:2024       0.0.0.0:*
LISTEN 0      511            [::1]:6379          [::]:*    users:(("redis-server",pid=2217,fd=7))
LISTEN 0      128                *:8080             *:*    users:(("node",pid=77,fd=20))
`;

const LOOPBACK6 = '0000:0000:0000:0000:0000:0000:0000:0001';
const ANY6 = '0000:0000:0000:0000:0000:0000:0000:0000';

describe('/proc/net/tcp parsing', () => {
  it('keeps only LISTEN sockets, with address, port and inode', () => {
    expect(parseProcNetTcp(PROC_NET_TCP, true)).toEqual([
      { address: '127.0.0.1', port: 4222, inode: 21001 },
      { address: '127.0.0.1', port: 6379, inode: 4631 },
      { address: '0.0.0.0', port: 2024, inode: 3100 },
      { address: '127.0.0.1', port: 50010, inode: 21002 },
    ]);
  });

  it('decodes IPv6 sockets: loopback, the wildcard, and IPv4-mapped addresses as IPv4', () => {
    expect(parseProcNetTcp(PROC_NET_TCP6, true)).toEqual([
      { address: LOOPBACK6, port: 6379, inode: 4632 },
      { address: ANY6, port: 22, inode: 3200 },
      { address: '127.0.0.1', port: 50011, inode: 3300 },
    ]);
  });

  it('reads each 32-bit word in host order: the same bytes mean another address on a big-endian host', () => {
    expect(decodeProcAddress('0100007F', true)).toBe('127.0.0.1');
    expect(decodeProcAddress('7F000001', false)).toBe('127.0.0.1');
    expect(decodeProcAddress('00000000000000000000000000000001', false)).toBe(LOOPBACK6);
    expect(decodeProcAddress('0100007', true)).toBeNull();
  });

  it('ignores headers, blank and malformed lines', () => {
    expect(parseProcNetTcp('', true)).toEqual([]);
    expect(parseProcNetTcp('  sl  local_address rem_address st\n\n   0: zz:zz 00000000:0000 0A x x x x x 0\n', true)).toEqual([]);
  });
});

describe('addresses', () => {
  it('normalises IPv4, IPv6 (brackets, zones, compressed or not) and IPv4-mapped IPv6', () => {
    expect(normalizeAddress('127.0.0.1')).toBe('127.0.0.1');
    expect(normalizeAddress('[::1]')).toBe(LOOPBACK6);
    expect(normalizeAddress('::')).toBe(ANY6);
    expect(normalizeAddress('fe80::1%eth0')).toBe('fe80:0000:0000:0000:0000:0000:0000:0001');
    expect(normalizeAddress('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(normalizeAddress('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(normalizeAddress('localhost')).toBeNull();
    expect(expandIPv6('2001:db8::8:800:200c:417a')).toBe('2001:0db8:0000:0000:0008:0800:200c:417a');
    expect(expandIPv6('1.2.3.4')).toBeNull();
  });

  it('takes host and port from server URLs, with the default port when none is given', () => {
    expect(hostPortOf('nats://127.0.0.1:4222', 4222)).toEqual({ host: '127.0.0.1', port: 4222 });
    expect(hostPortOf('redis://:secret@127.0.0.1:6380/2', 6379)).toEqual({ host: '127.0.0.1', port: 6380 });
    expect(hostPortOf('redis://127.0.0.1', 6379)).toEqual({ host: '127.0.0.1', port: 6379 });
    expect(hostPortOf('127.0.0.1:4333', 4222)).toEqual({ host: '127.0.0.1', port: 4333 });
    expect(hostPortOf('nats://[::1]:4222', 4222)).toEqual({ host: '::1', port: 4222 });
    expect(hostPortOf('nats://a:4222,nats://b:4222', 4222)).toHaveProperty('reason');
  });
});

describe('choosing the listener a connection reaches', () => {
  const listeners = [
    { address: '127.0.0.1', port: 4222, inode: 1 },
    { address: '0.0.0.0', port: 4222, inode: 2 },
    { address: ANY6, port: 4222, inode: 3 },
    { address: ANY6, port: 5222, inode: 4 },
    { address: LOOPBACK6, port: 6222, inode: 5 },
  ];

  it('prefers the exact address, then the IPv4 wildcard, then the IPv6 wildcard', () => {
    expect(listenersFor(listeners, 4222, '127.0.0.1').map((l) => l.inode)).toEqual([1]);
    expect(listenersFor(listeners, 4222, '10.0.0.5').map((l) => l.inode)).toEqual([2]);
    expect(listenersFor(listeners, 5222, '127.0.0.1').map((l) => l.inode)).toEqual([4]);
    expect(listenersFor(listeners, 4222, LOOPBACK6).map((l) => l.inode)).toEqual([3]);
  });

  it('finds nothing on another port, or on an IPv6-only listener for an IPv4 address', () => {
    expect(listenersFor(listeners, 7222, '127.0.0.1')).toEqual([]);
    expect(listenersFor(listeners, 6222, '127.0.0.1')).toEqual([]);
  });

  it('names the parent when a server shares its socket with a forked child; refuses two unrelated processes', () => {
    const ppids: Record<number, number> = { 2217: 1, 4410: 2217, 5001: 1 };
    const ppidOf = (pid: number) => ppids[pid] ?? null;
    expect(rootProcess([2217, 4410], ppidOf)).toBe(2217);
    expect(rootProcess([2217, 2217], ppidOf)).toBe(2217);
    expect(rootProcess([2217, 5001], ppidOf)).toBeNull();
    expect(rootProcess([], ppidOf)).toBeNull();
  });
});

describe('ss -ltnp parsing', () => {
  it('reads addresses, ports and pids; `*` is both wildcards; no users means no pids', () => {
    const parsed = parseSsListeners(SS);
    expect(parsed).toContainEqual({ address: '127.0.0.1', port: 6379, pids: [2217, 4410] });
    expect(parsed).toContainEqual({ address: '127.0.0.1', port: 4222, pids: [2957] });
    expect(parsed).toContainEqual({ address: '127.0.0.1', port: 50010, pids: [5001] });
    expect(parsed).toContainEqual({ address: '0.0.0.0', port: 2024, pids: [] });
    expect(parsed).toContainEqual({ address: LOOPBACK6, port: 6379, pids: [2217] });
    expect(parsed).toContainEqual({ address: '0.0.0.0', port: 8080, pids: [77] });
    expect(parsed).toContainEqual({ address: ANY6, port: 8080, pids: [77] });
    expect(parsed).toHaveLength(7);
  });
});

describe('small /proc readers', () => {
  it('reads socket inodes from fd links and PPid from status', () => {
    expect(socketInode('socket:[21001]')).toBe(21001);
    expect(socketInode('pipe:[21001]')).toBeNull();
    expect(socketInode('/var/log/nats-server.log')).toBeNull();
    expect(parsePpid('Name:\tredis-server\nState:\tS (sleeping)\nPid:\t4410\nPPid:\t2217\n')).toBe(2217);
    expect(parsePpid('Name:\tx\n')).toBeNull();
  });
});

describe('findListeningProcess over a fixture /proc', () => {
  let root: string;
  const noSs = () => null;

  /** A fake /proc: the two tables, and processes with their PPid and socket fds. */
  function fakeProc(processes: Record<number, { ppid: number; sockets: number[] }>): string {
    const dir = mkdtempSync(join(tmpdir(), 'bench-proc-'));
    mkdirSync(join(dir, 'net'));
    writeFileSync(join(dir, 'net', 'tcp'), PROC_NET_TCP);
    writeFileSync(join(dir, 'net', 'tcp6'), PROC_NET_TCP6);
    for (const [pid, { ppid, sockets }] of Object.entries(processes)) {
      mkdirSync(join(dir, pid, 'fd'), { recursive: true });
      writeFileSync(join(dir, pid, 'status'), `Name:\tserver\nPid:\t${pid}\nPPid:\t${ppid}\n`);
      symlinkSync('/dev/null', join(dir, pid, 'fd', '0'));
      sockets.forEach((inode, i) => symlinkSync(`socket:[${inode}]`, join(dir, pid, 'fd', String(i + 3))));
    }
    return dir;
  }

  beforeEach(() => {
    // 2957: nats-server on 4222; 5001: a second nats-server on 50010; 2217 + its fork 4410: redis on 127.0.0.1 and ::1.
    root = fakeProc({
      2957: { ppid: 1, sockets: [21001, 21055] },
      5001: { ppid: 1, sockets: [21002] },
      2217: { ppid: 1, sockets: [4631, 4632] },
      4410: { ppid: 2217, sockets: [4631, 4632] },
    });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('names the process listening on each port', () => {
    expect(findListeningProcess('nats://127.0.0.1:4222', 4222, { procRoot: root, ss: noSs })).toEqual({ pid: 2957, via: 'proc' });
    expect(findListeningProcess('nats://127.0.0.1:50010', 4222, { procRoot: root, ss: noSs })).toEqual({ pid: 5001, via: 'proc' });
    expect(findListeningProcess('redis://127.0.0.1:6379', 6379, { procRoot: root, ss: noSs })).toEqual({ pid: 2217, via: 'proc' });
    expect(findListeningProcess('redis://localhost', 6379, { procRoot: root, ss: noSs })).toEqual({ pid: 2217, via: 'proc' });
  });

  it('says why instead of guessing', () => {
    expect(findListeningProcess('nats://127.0.0.1:4999', 4222, { procRoot: root, ss: noSs })).toEqual({
      pid: null,
      reason: 'no process listens on 127.0.0.1:4999',
    });
    expect(findListeningProcess('nats://nats:4222', 4222, { procRoot: root, ss: noSs }).reason).toMatch(/is a name/);
    expect(findListeningProcess('nats://192.0.2.10:4222', 4222, { procRoot: root, ss: noSs }).reason).toMatch(/not on this machine/);
    // 0.0.0.0:2024 is listed, but no process of this /proc holds its inode, and there is no ss.
    expect(findListeningProcess('nats://127.0.0.1:2024', 4222, { procRoot: root, ss: noSs }).reason).toMatch(/belongs to no process this user can see/);
  });

  it('falls back to ss when /proc cannot name the holder', () => {
    expect(findListeningProcess('nats://127.0.0.1:2024', 4222, { procRoot: root, ss: () => SS }).reason).toMatch(/belongs to no process/);
    expect(findListeningProcess('nats://127.0.0.1:8080', 4222, { procRoot: join(root, 'missing'), ss: () => SS })).toEqual({ pid: 77, via: 'ss' });
    expect(findListeningProcess('nats://127.0.0.1:4222', 4222, { procRoot: join(root, 'missing'), ss: noSs }).reason).toMatch(/no \/proc\/net\/tcp and no ss/);
  });
});
