import { Controller, Get, Inject, UseFilters, UseGuards } from '@nestjs/common';
import { ApiAuthGuard, Caller } from '../auth/auth.guard';
import { visibleProjects, type Principal } from '../auth/roles';
import { ProjectionStatus, scopedProjectionsReport, type ProjectionsReport, type ScopedProjectionsReport } from '../projection/projection-status';
import { ApiExceptionFilter, NoQuery } from './http';

/**
 * `GET /v1/projections`: every projection's active generation (what operators read; a rebuild
 * never touches it until its atomic swap), how far it is behind the stream, and the rebuilds
 * running on it (this notifier's, another's, `baton replay`'s) with their progress. Any
 * authenticated caller: it says nothing about any project's data. A caller that sees every project
 * (an admin, a `*` token) gets the events stream's counters too; one scoped to some projects gets
 * the report without them ({@link scopedProjectionsReport}): they count every tenant's events.
 */
@UseFilters(ApiExceptionFilter)
@UseGuards(ApiAuthGuard)
@Controller('v1/projections')
export class ProjectionsController {
  constructor(@Inject(ProjectionStatus) private readonly status: ProjectionStatus) {}

  @Get()
  @NoQuery()
  async list(@Caller() caller: Principal): Promise<ProjectionsReport | ScopedProjectionsReport> {
    const report = await this.status.report();
    return visibleProjects(caller) === null ? report : scopedProjectionsReport(report);
  }
}
