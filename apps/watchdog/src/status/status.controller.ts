import { Controller, Get, Inject } from '@nestjs/common';
import { DeadlineTracker, type DeadlineTrackerStatus } from '../deadlines/deadline-tracker';
import { GuardRunner, type GuardRunnerStatus } from '../guards/guard-runner';
import { WatchdogSnapshots, type SnapshotStatus } from '../snapshot/watchdog-snapshots';
import { EVENTS_HUB, type FollowHub } from '../stream/stream-follower';

/**
 * What `GET /watchdog/status` answers: the lease table's status, the loop guards' under `guards`,
 * and under `stream` how far the watchdog has read the events stream (`read_seq`: the last event
 * handed to its tables; `behind`: events stored and not read yet, null when it cannot be known).
 */
export type WatchdogStatus = DeadlineTrackerStatus & {
  guards: GuardRunnerStatus;
  stream: { read_seq: number; behind: number | null };
  snapshots: SnapshotStatus;
};

/**
 * `GET /watchdog/status`: whether the deadline table has caught up with the events stream, how many
 * claimed handoffs it tracks and the last event sequence it applied; under `guards`, the loop
 * guards' and escalations' follower (caught up, runs and handoffs tracked, open circuits, stop
 * requests asked, events that did not decode); under `snapshots`, the sequence restored through at
 * start (or why none was) and the saves since. (Readiness itself is the shared `/health/ready`.)
 */
@Controller('watchdog')
export class StatusController {
  constructor(
    @Inject(DeadlineTracker) private readonly tracker: DeadlineTracker,
    @Inject(GuardRunner) private readonly guards: GuardRunner,
    @Inject(EVENTS_HUB) private readonly hub: FollowHub,
    @Inject(WatchdogSnapshots) private readonly snapshots: WatchdogSnapshots,
  ) {}

  @Get('status')
  async status(): Promise<WatchdogStatus> {
    const behind = await this.hub.behind();
    const snapshots = this.snapshots.status();
    return {
      ...this.tracker.status(),
      guards: this.guards.status(),
      // Restored from a snapshot, the folds hold the events through its sequence before any is delivered.
      stream: { read_seq: Math.max(this.hub.lastSeq(), snapshots.restored_through_seq), behind },
      snapshots,
    };
  }
}
