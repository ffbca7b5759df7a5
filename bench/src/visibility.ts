import type Redis from 'ioredis';
import { batonProjections, LuaScript } from '@baton/projections';
import { sleep } from './stats';

/*
 * The bench drives the cycle workflow of @baton/testing (ping → pong → pang → ping ...: every
 * result dispatches) through Baton's documented subjects; what is the bench's own is how it sees
 * a hop become visible in the projections.
 */

const MIN_SEQ_SCRIPT = new LuaScript(
  'bench-min-seq',
  `
local low = nil
for i = 1, #ARGV do
  local base = KEYS[1] .. ':' .. ARGV[i]
  local gen = redis.call('GET', base .. ':active')
  local seq = 0
  if gen then seq = tonumber(redis.call('HGET', base .. ':g' .. gen .. ':~meta', 'seq') or '0') end
  if low == nil or seq < low then low = seq end
end
return low or 0
`,
);

/**
 * Watches how far the notifier's projections have applied the events stream (the lowest last
 * applied seq over every projection, read in one Lua call) and resolves waiters as their event
 * becomes visible. Polls every `intervalMs`.
 */
export class VisibilityWatcher {
  private lastSeq = 0;
  private readonly waiters = new Map<number, Array<(at: number) => void>>();
  private running = true;
  private readonly loop: Promise<void>;
  private readonly names = batonProjections().map((p) => p.name);

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly intervalMs = 1,
    private readonly clock: () => number = () => Date.now(),
  ) {
    this.loop = this.poll();
  }

  /** The lowest last applied seq over the projections, as last polled. */
  get applied(): number {
    return this.lastSeq;
  }

  /** Read it now. */
  async read(): Promise<number> {
    // By its SHA (EVALSHA): the poll runs every millisecond, and its CPU counts in the hop's.
    return Number(await MIN_SEQ_SCRIPT.run(this.redis, [`${this.prefix}:proj`], this.names));
  }

  /** Resolves with the clock's time when the projections have applied `seq`. */
  visible(seq: number): Promise<number> {
    if (seq <= this.lastSeq) return Promise.resolve(this.clock());
    return new Promise((resolve) => {
      const list = this.waiters.get(seq) ?? [];
      list.push(resolve);
      this.waiters.set(seq, list);
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async poll(): Promise<void> {
    while (this.running) {
      try {
        this.lastSeq = await this.read();
        const at = this.clock();
        for (const [seq, list] of this.waiters) {
          if (seq > this.lastSeq) continue;
          this.waiters.delete(seq);
          for (const resolve of list) resolve(at);
        }
      } catch {
        // Redis hiccup: poll again
      }
      await sleep(this.intervalMs);
    }
  }
}
