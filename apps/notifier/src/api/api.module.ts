import { Module } from '@nestjs/common';
import { ProjectionModule } from '../projection/projection.module';
import { DocsController, HandoffsController, InboxController, RunsController, StopsController } from './controllers';
import { OperatorActions } from './operator-actions';

/** The operator HTTP API (`/v1/...`, `/openapi.json`, `/docs`). */
@Module({
  imports: [ProjectionModule],
  controllers: [InboxController, StopsController, HandoffsController, RunsController, DocsController],
  providers: [OperatorActions],
})
export class ApiModule {}
