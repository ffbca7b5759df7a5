import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import { ApiError } from '../api/http';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import type { HttpRequest } from './http-types';

/** The window failed authentications are counted in. */
export const AUTH_FAILURE_WINDOW_MS = 60_000;
/** Addresses tracked at most (the oldest window is forgotten first), so a flood of addresses cannot grow memory without bound. */
const MAX_TRACKED = 10_000;

/** The client address of a request: Express's `req.ip` (the socket's peer unless `trust proxy` is set), else the socket's. */
export function clientAddress(req: HttpRequest): string {
  return req.ip ?? req.socket?.remoteAddress ?? 'unknown';
}

/** What {@link AuthFailureLimiter.check} says about an address. */
export type AuthAllowance = { blocked: false } | { blocked: true; retryAfterSec: number };

/**
 * Rate-limits failed authentications per client address: a bearer token that does not verify
 * (malformed, unknown, revoked, expired, wrong secret, an altered record) and a failed sign-in
 * count; a request without credentials does not, nor a token whose secret matched a record made
 * before the token key (`unsigned`): nothing is being guessed. After
 * `NOTIFIER_AUTH_FAILURES_PER_MINUTE` failures in a minute (fixed window, counted from the first
 * failure), every authentication from the address — valid or not, so guessing cannot go on — is
 * answered 429 `too_many_auth_failures` with `Retry-After` until the window ends. Counted in this
 * notifier instance's memory (each instance counts its own).
 */
@Injectable()
export class AuthFailureLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();

  constructor(@Inject(NOTIFIER_CONFIG) private readonly config: NotifierConfig) {}

  private get limit(): number {
    return this.config.NOTIFIER_AUTH_FAILURES_PER_MINUTE;
  }

  /** Is `address` blocked now? */
  check(address: string, now = Date.now()): AuthAllowance {
    if (this.limit === 0) return { blocked: false };
    const window = this.windows.get(address);
    if (!window) return { blocked: false };
    if (window.resetAt <= now) {
      this.windows.delete(address);
      return { blocked: false };
    }
    return window.count >= this.limit ? { blocked: true, retryAfterSec: Math.max(1, Math.ceil((window.resetAt - now) / 1000)) } : { blocked: false };
  }

  /** The failures counted for `address` in its current window (0 when none), counting nothing. */
  count(address: string, now = Date.now()): number {
    const window = this.windows.get(address);
    return window === undefined || window.resetAt <= now ? 0 : window.count;
  }

  /** Count a failed authentication from `address`; returns the failures in its current window. */
  fail(address: string, now = Date.now()): number {
    if (this.limit === 0) return 0;
    let window = this.windows.get(address);
    if (!window || window.resetAt <= now) {
      this.windows.delete(address);
      if (this.windows.size >= MAX_TRACKED) {
        const oldest = this.windows.keys().next();
        if (!oldest.done) this.windows.delete(oldest.value);
      }
      window = { count: 0, resetAt: now + AUTH_FAILURE_WINDOW_MS };
      this.windows.set(address, window);
    }
    window.count++;
    return window.count;
  }

  /** The 429 an address over the limit is answered with. */
  refusal(retryAfterSec: number): ApiError {
    return new ApiError(
      HttpStatus.TOO_MANY_REQUESTS,
      'too_many_auth_failures',
      `too many failed authentications from this address; retry in ${retryAfterSec} s`,
      [],
      { retry_after_sec: retryAfterSec },
    );
  }
}
