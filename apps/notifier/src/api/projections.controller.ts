import { Controller, Get, Inject, UseFilters, UseGuards } from '@nestjs/common';
import { ApiAuthGuard } from '../auth/auth.guard';
import { ProjectionStatus, type ProjectionsReport } from '../projection/projection-status';
import { ApiExceptionFilter } from './http';

/**
 * `GET /v1/projections`: every projection's active generation (what operators read; a rebuild
 * never touches it until its atomic swap), how far it is behind the stream, and the rebuilds
 * running on it (this notifier's, another's, `baton replay`'s) with their progress. Any
 * authenticated caller: it says nothing about any project's data.
 */
@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/projections')
export class ProjectionsController {
  constructor(@Inject(ProjectionStatus) private readonly status: ProjectionStatus) {}

  @Get()
  list(): Promise<ProjectionsReport> {
    return this.status.report();
  }
}
