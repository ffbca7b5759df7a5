import { Module } from '@nestjs/common';
import { ApiModule } from '../api/api.module';
import { AuthModule } from '../auth/auth.module';
import { NoticesModule } from '../notices/notices.module';
import { ProjectionModule } from '../projection/projection.module';
import { EventStreamController, EventStreams } from './event-stream.controller';
import { InboxReader } from './inbox-reader';
import { WebController } from './web.controller';

/** The web inbox (pages, forms, sign-in) and the live event stream. */
@Module({
  imports: [ProjectionModule, AuthModule, ApiModule, NoticesModule],
  controllers: [WebController, EventStreamController],
  providers: [InboxReader, EventStreams],
})
export class WebModule {}
