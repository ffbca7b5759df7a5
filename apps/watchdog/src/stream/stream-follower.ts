/*
 * The watchdog follows the events stream with the event store's ordered follower
 * (`followStream` in @baton/eventstore: replays from a sequence, keeps delivering, and re-creates
 * its consumer from the last sequence seen when it is deleted or lost). Re-exported here for the
 * watchdog's trackers and guards.
 */
export { followStream } from '@baton/eventstore';
export type { FollowedMessage, StreamFollower } from '@baton/eventstore';
