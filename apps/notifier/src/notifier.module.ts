import { Module } from '@nestjs/common';
import { ApiModule } from './api/api.module';
import { ProjectionModule } from './projection/projection.module';

/** The notifier: Redis projections kept from the events stream, human action notices, the operator API. */
@Module({ imports: [ProjectionModule, ApiModule] })
export class NotifierModule {}
