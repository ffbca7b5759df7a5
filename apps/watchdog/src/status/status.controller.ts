import { Controller, Get, Inject } from '@nestjs/common';
import { DeadlineTracker, type DeadlineTrackerStatus } from '../deadlines/deadline-tracker';

/**
 * `GET /watchdog/status`: whether the deadline table has caught up with the events stream, how many
 * claimed handoffs it tracks and the last event sequence it applied. (Readiness itself is the
 * shared `/health/ready`.)
 */
@Controller('watchdog')
export class StatusController {
  constructor(@Inject(DeadlineTracker) private readonly tracker: DeadlineTracker) {}

  @Get('status')
  status(): DeadlineTrackerStatus {
    return this.tracker.status();
  }
}
