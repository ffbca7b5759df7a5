// Read a V8 CPU profile (`--cpu-prof`, e.g. `BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"`
// for the services under `debug/load.js`, `BENCH_REBUILD_NODE_ARGS` for the rebuilding process):
//
//   node dist/bench/src/debug/profile.js summary   <file.cpuprofile> [top]        self time by kind of code and by function
//   node dist/bench/src/debug/profile.js inclusive <file.cpuprofile> [top]        time under each function (callees included)
//   node dist/bench/src/debug/profile.js callers   <file.cpuprofile> <fn> [depth] who calls a function, by time under it
//   node dist/bench/src/debug/profile.js package   <file.cpuprofile> <path> [depth]
//                                              which code outside a path (e.g. node_modules/zod) spends time in it
//   node dist/bench/src/debug/profile.js alloc     <file.heapprofile> [top] [depth]  bytes allocated by function, and by
//                                              allocating function with its callers (from debug/alloc-preload.ts)
//
// Percentages are of the profile's busy time (idle samples left out). docs/performance.md records what they showed.
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

class Profile {
  readonly byId = new Map<number, ProfileNode>();
  readonly parent = new Map<number, number>();
  readonly total: number;
  readonly busy: number;

  constructor(readonly raw: CpuProfile) {
    for (const node of raw.nodes) {
      this.byId.set(node.id, node);
      for (const child of node.children ?? []) this.parent.set(child, node.id);
    }
    let total = 0;
    let idle = 0;
    raw.samples.forEach((id, i) => {
      const delta = raw.timeDeltas[i] ?? 0;
      total += delta;
      if (this.frame(id).functionName === '(idle)') idle += delta;
    });
    this.total = total;
    this.busy = total - idle;
  }

  frame(id: number): CallFrame {
    const node = this.byId.get(id);
    if (!node) throw new Error(`the profile has no node ${id}`);
    return node.callFrame;
  }

  /** Every sample as its leaf node and duration (µs), idle samples left out. */
  *samples(): Generator<[number, number]> {
    for (let i = 0; i < this.raw.samples.length; i++) {
      const id = this.raw.samples[i] as number;
      if (this.frame(id).functionName !== '(idle)') yield [id, this.raw.timeDeltas[i] ?? 0];
    }
  }

  /** The stack of a node, leaf first. */
  *stack(id: number): Generator<number> {
    for (let at: number | undefined = id; at !== undefined; at = this.parent.get(at)) yield at;
  }

  share(us: number): string {
    return `${((100 * us) / this.busy).toFixed(1).padStart(5)}%`;
  }
}

const where = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`;

/** What kind of code a frame is: Baton's, a dependency's, Node's own, the collector. */
function kindOf(f: CallFrame): string {
  if (f.functionName === '(garbage collector)') return 'gc';
  if (f.functionName === '(program)') return 'program';
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  if (dep) return dep[1] as string;
  if (f.url === '' || f.url.startsWith('node:')) return 'node/native';
  return 'baton';
}

function add(into: Map<string, number>, key: string, us: number): void {
  into.set(key, (into.get(key) ?? 0) + us);
}

function print(profile: Profile, table: Map<string, number>, top: number): void {
  for (const [key, us] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${profile.share(us)} ${key}\n`);
}

function summary(profile: Profile, top: number): void {
  const kinds = new Map<string, number>();
  const functions = new Map<string, number>();
  for (const [id, us] of profile.samples()) {
    add(kinds, kindOf(profile.frame(id)), us);
    add(functions, where(profile.frame(id)), us);
  }
  process.stdout.write(`busy ${(profile.busy / 1000).toFixed(0)} ms of ${(profile.total / 1000).toFixed(0)} ms\n`);
  print(profile, kinds, 15);
  process.stdout.write('---\n');
  print(profile, functions, top);
}

function inclusive(profile: Profile, top: number): void {
  const under = new Map<string, number>();
  for (const [id, us] of profile.samples()) {
    const seen = new Set<string>();
    for (const at of profile.stack(id)) seen.add(where(profile.frame(at)));
    for (const key of seen) add(under, key, us);
  }
  print(profile, under, top);
}

function callers(profile: Profile, name: string, depth: number): void {
  const by = new Map<string, number>();
  let sum = 0;
  for (const [id, us] of profile.samples()) {
    const stack = [...profile.stack(id)];
    // The outermost call of `name` on this stack, so recursion counts once.
    let at = -1;
    stack.forEach((node, i) => {
      if (profile.frame(node).functionName === name) at = i;
    });
    if (at < 0) continue;
    sum += us;
    add(
      by,
      stack
        .slice(at + 1, at + 1 + depth)
        .map((node) => where(profile.frame(node)))
        .join(' <- '),
      us,
    );
  }
  process.stdout.write(`${name}: ${profile.share(sum)} under it\n`);
  print(profile, by, 15);
}

function inPackage(profile: Profile, path: string, depth: number): void {
  // Frames with no script are code the package generated at run time (zod compiles its parsers).
  const inside = (f: CallFrame) => f.url.includes(path) || (f.url === '' && f.functionName === '');
  const by = new Map<string, number>();
  let sum = 0;
  for (const [id, us] of profile.samples()) {
    const stack = [...profile.stack(id)];
    if (!inside(profile.frame(id))) continue;
    sum += us;
    const out = stack.findIndex((node) => !inside(profile.frame(node)));
    add(
      by,
      stack
        .slice(out, out + depth)
        .map((node) => where(profile.frame(node)))
        .join(' <- '),
      us,
    );
  }
  process.stdout.write(`${path}: ${profile.share(sum)} (self)\n`);
  print(profile, by, 15);
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children?: HeapNode[];
}

/** Bytes allocated by each function (self), and by each allocating function with its `depth` nearest callers. */
function alloc(head: HeapNode, top: number, depth: number): void {
  const self = new Map<string, number>();
  const chains = new Map<string, number>();
  let total = 0;
  const walk = (node: HeapNode, stack: string[]) => {
    const here = [where(node.callFrame), ...stack];
    if (node.selfSize > 0) {
      total += node.selfSize;
      add(self, here[0] as string, node.selfSize);
      add(chains, here.slice(0, depth + 1).join(' <- '), node.selfSize);
    }
    for (const child of node.children ?? []) walk(child, here);
  };
  walk(head, []);
  const show = (table: Map<string, number>) => {
    for (const [key, bytes] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`${((100 * bytes) / total).toFixed(1).padStart(5)}% ${(bytes / 1048576).toFixed(1).padStart(8)} MB ${key}\n`);
  };
  process.stdout.write(`sampled ${(total / 1048576).toFixed(1)} MB allocated\n`);
  show(self);
  process.stdout.write('---\n');
  show(chains);
}

function main(argv: string[]): void {
  const [command, file, arg, extra] = argv;
  if (command === undefined || file === undefined) {
    process.stderr.write(
      'usage: profile.js summary|inclusive <file> [top] | callers <file> <function> [depth] | package <file> <path> [depth] | alloc <file.heapprofile> [top] [depth]\n',
    );
    process.exit(64);
  }
  if (command === 'alloc') {
    const heap = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
    return alloc(heap.head, Number(arg ?? 30), Number(extra ?? 2));
  }
  const profile = new Profile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  switch (command) {
    case 'summary':
      return summary(profile, Number(arg ?? 40));
    case 'inclusive':
      return inclusive(profile, Number(arg ?? 40));
    case 'callers':
      if (arg === undefined) throw new Error('callers needs a function name');
      return callers(profile, arg, Number(extra ?? 3));
    case 'package':
      if (arg === undefined) throw new Error('package needs a path, e.g. node_modules/zod');
      return inPackage(profile, arg, Number(extra ?? 2));
    default:
      process.stderr.write(`unknown command ${command}\n`);
      process.exit(64);
  }
}

main(process.argv.slice(2));
