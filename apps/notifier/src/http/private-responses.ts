import { Injectable, type NestMiddleware } from '@nestjs/common';

/**
 * Every `/v1` answer is for the token (or session) that asked: `Cache-Control: private, no-cache`
 * keeps shared caches from storing it and makes a browser revalidate before reusing it (a
 * conditional GET with the `ETag` then answers 304 when nothing changed), and `Vary: Authorization,
 * Cookie` says the answer depends on who asked.
 */
@Injectable()
export class PrivateResponses implements NestMiddleware {
  use(_req: unknown, res: { setHeader(name: string, value: string): void }, next: () => void): void {
    res.setHeader('Cache-Control', 'private, no-cache');
    res.setHeader('Vary', 'Authorization, Cookie');
    next();
  }
}
