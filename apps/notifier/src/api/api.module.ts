import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { NoticesModule } from '../notices/notices.module';
import { ProjectionModule } from '../projection/projection.module';
import {
  DocsController,
  HandoffsController,
  InboxController,
  MeshesController,
  ProjectRecordsController,
  RunsController,
  StopsController,
} from './controllers';
import { MeshReader } from './mesh-reader';
import { NoticeRedelivery } from './notice-redelivery';
import { AnswerOutcomes } from './answer-outcomes';
import { OperatorActions } from './operator-actions';
import { ProjectionsController } from './projections.controller';
import { ProjectControls } from './project-controls';

/** The operator HTTP API (`/v1/...`, token-authenticated; `/openapi.json`, `/docs`). */
@Module({
  imports: [ProjectionModule, AuthModule, NoticesModule],
  controllers: [
    InboxController,
    StopsController,
    HandoffsController,
    RunsController,
    MeshesController,
    ProjectRecordsController,
    DocsController,
    ProjectionsController,
  ],
  providers: [OperatorActions, AnswerOutcomes, MeshReader, ProjectControls, NoticeRedelivery],
  exports: [OperatorActions, AnswerOutcomes, MeshReader],
})
export class ApiModule {}
