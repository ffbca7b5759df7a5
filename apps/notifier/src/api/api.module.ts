import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { ProjectionModule } from '../projection/projection.module';
import { DocsController, HandoffsController, InboxController, ProjectRecordsController, RunsController, StopsController } from './controllers';
import { AnswerOutcomes } from './answer-outcomes';
import { OperatorActions } from './operator-actions';

/** The operator HTTP API (`/v1/...`, token-authenticated; `/openapi.json`, `/docs`). */
@Module({
  imports: [ProjectionModule, AuthModule],
  controllers: [InboxController, StopsController, HandoffsController, RunsController, ProjectRecordsController, DocsController],
  providers: [OperatorActions, AnswerOutcomes],
  exports: [OperatorActions, AnswerOutcomes],
})
export class ApiModule {}
