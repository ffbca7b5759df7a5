import type { JetStreamClient } from 'nats';
import { followStream, type FollowedMessage, type FollowOptions, type StreamFollower } from './stream-reader';
import { patternWithin, subjectMatches } from './subject-patterns';

/**
 * One ordered follow of a stream shared by several in-process followers.
 *
 * Each follower of a stream is a consumer of its own: the server delivers every matching message
 * once per follower, and the client parses each delivery. A service whose components follow the
 * same stream (the watchdog's loop guards, lease table and handoff-deadline table) gets the same
 * messages several times over. A hub follows the stream once with the widest filter and hands
 * each message, in order and synchronously, to every follower whose filter matches its subject.
 *
 * Followers join with {@link FollowHub.follow} before the hub starts (a late join would miss what
 * was delivered already, so it is refused); {@link FollowHub.start} then opens the one consumer
 * from the earliest `startSeq` asked for. A follower's `caughtUp` resolves when the hub has handed
 * over every message stored when it started; its `lastSeq` is the last message it was handed; its
 * `stop` detaches it, and the consumer goes when the last follower has stopped.
 */
export interface FollowHub {
  /** A follower limited to `opts.filterSubject`, which must lie within the hub's filter. */
  follow(opts: FollowOptions): Promise<StreamFollower>;
  /** Open the shared consumer. Once. */
  start(): Promise<void>;
  /** Stop every follower and remove the consumer. Safe to call twice. */
  stop(): Promise<void>;
  /** How many followers share the hub. */
  followers(): number;
  /** Stream sequence of the last message the hub handed over (to every follower it matched); before the first, the sequence before where it started (0 before it started). */
  lastSeq(): number;
  /** {@link StreamFollower.behind} of the shared follow: null before the hub started. */
  behind(): Promise<number | null>;
}

export interface FollowHubOptions {
  js: JetStreamClient;
  stream: string;
  /** The widest filter any follower needs (e.g. `<prefix>.ev.>`). */
  filterSubject: string;
  /** Messages per pull (default 1000). */
  batch?: number;
}

interface Member {
  opts: FollowOptions;
  /** Null when the member wants every message of the hub. */
  filter: string | null;
  startSeq: number;
  lastSeq: number;
  stopped: boolean;
}

export function followHub(options: FollowHubOptions): FollowHub {
  const members: Member[] = [];
  let follower: StreamFollower | null = null;
  let started = false;
  let stopping: Promise<void> | null = null;
  let markStarted: (f: StreamFollower) => void = () => undefined;
  const startedFollower = new Promise<StreamFollower>((resolve) => (markStarted = resolve));

  const deliver = (message: FollowedMessage) => {
    for (const member of members) {
      if (member.stopped || message.seq < member.startSeq) continue;
      if (member.filter !== null && !subjectMatches(member.filter, message.subject)) continue;
      member.lastSeq = message.seq;
      try {
        member.opts.onMessage(message);
      } catch (error) {
        member.opts.onError?.(error, message);
      }
    }
  };

  const behind = async (): Promise<number | null> => (follower === null ? null : follower.behind());

  const stopAll = () =>
    (stopping ??= (async () => {
      for (const m of members) m.stopped = true;
      if (follower) await follower.stop();
    })());

  return {
    followers: () => members.filter((m) => !m.stopped).length,
    lastSeq: () => follower?.lastSeq() ?? 0,
    behind,
    async follow(opts) {
      if (started) throw new Error(`follow ${opts.filterSubject}: the hub on ${options.stream} has started; followers join before it starts`);
      if (!patternWithin(options.filterSubject, opts.filterSubject)) {
        throw new Error(`follow ${opts.filterSubject}: not within the hub's filter ${options.filterSubject}`);
      }
      const member: Member = {
        opts,
        filter: opts.filterSubject === options.filterSubject ? null : opts.filterSubject,
        startSeq: opts.startSeq ?? 1,
        lastSeq: Math.max(0, (opts.startSeq ?? 1) - 1),
        stopped: false,
      };
      members.push(member);
      const caughtUp = startedFollower.then((f) => f.caughtUp);
      let caught = false;
      void caughtUp.then(() => (caught = true));
      return {
        caughtUp,
        isCaughtUp: () => caught,
        lastSeq: () => member.lastSeq,
        // The hub hands each message to its followers as it comes: what the hub has not handed over, none of them has.
        behind,
        async stop() {
          member.stopped = true;
          if (members.every((m) => m.stopped)) await stopAll();
        },
      };
    },
    async start() {
      if (started) throw new Error(`the hub on ${options.stream} is started already`);
      started = true;
      const live = members.filter((m) => !m.stopped);
      if (live.length === 0) return;
      const startSeq = Math.min(...live.map((m) => m.startSeq));
      follower = await followStream({
        js: options.js,
        stream: options.stream,
        filterSubject: options.filterSubject,
        ...(startSeq > 1 ? { startSeq } : {}),
        ...(options.batch !== undefined ? { batch: options.batch } : {}),
        onMessage: deliver,
      });
      if (stopping) await follower.stop();
      markStarted(follower);
    },
    stop: stopAll,
  };
}
