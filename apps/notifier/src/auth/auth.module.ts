import { Module } from '@nestjs/common';
import { ApiAuthGuard } from './auth.guard';
import { AuthService } from './auth.service';

/** Operator tokens, browser sessions and the API guard. */
@Module({ providers: [AuthService, ApiAuthGuard], exports: [AuthService, ApiAuthGuard] })
export class AuthModule {}
