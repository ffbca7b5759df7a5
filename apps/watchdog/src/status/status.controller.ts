import { Controller, Get, Inject } from '@nestjs/common';
import { DeadlineTracker, type DeadlineTrackerStatus } from '../deadlines/deadline-tracker';
import { GuardRunner, type GuardRunnerStatus } from '../guards/guard-runner';

/** What `GET /watchdog/status` answers: the lease table's status, and the loop guards' under `guards`. */
export type WatchdogStatus = DeadlineTrackerStatus & { guards: GuardRunnerStatus };

/**
 * `GET /watchdog/status`: whether the deadline table has caught up with the events stream, how many
 * claimed handoffs it tracks and the last event sequence it applied; under `guards`, the loop
 * guards' and escalations' follower (caught up, runs and handoffs tracked, open circuits, stop
 * requests asked, events that did not decode). (Readiness itself is the shared `/health/ready`.)
 */
@Controller('watchdog')
export class StatusController {
  constructor(
    @Inject(DeadlineTracker) private readonly tracker: DeadlineTracker,
    @Inject(GuardRunner) private readonly guards: GuardRunner,
  ) {}

  @Get('status')
  status(): WatchdogStatus {
    return { ...this.tracker.status(), guards: this.guards.status() };
  }
}
