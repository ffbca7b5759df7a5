import { followStream, type FollowOptions, type NatsJetStream, type StreamFollower } from '@baton/eventstore';

/*
 * The watchdog follows the events stream with the event store's ordered follower
 * (`followStream` in @baton/eventstore: replays from a sequence, keeps delivering, and re-creates
 * its consumer from the last sequence seen when it is deleted or lost). In the service its three
 * followers (loop guards, lease table, handoff-deadline table) share one consumer through a
 * `followHub` (watchdog.module.ts): each event is delivered to the watchdog once, not three times.
 */
export { followStream, followHub } from '@baton/eventstore';
export type { FollowedMessage, FollowHub, StreamFollower } from '@baton/eventstore';

/** Opens a follower of the events stream: a consumer of its own, or a share of a hub's. */
export type Follow = (opts: FollowOptions) => Promise<StreamFollower>;

/** The follow a component uses: the one it was given, else a consumer of its own on `stream`. */
export function followOf(opts: { js: NatsJetStream; stream: string; follow?: Follow }): Follow {
  return opts.follow ?? ((follow) => followStream({ ...follow, js: opts.js, stream: opts.stream }));
}

/** The provider of the watchdog's one shared follow of the events stream (a `FollowHub`). */
export const EVENTS_HUB = Symbol('EVENTS_HUB');
