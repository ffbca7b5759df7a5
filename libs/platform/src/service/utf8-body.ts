import { firstInvalidUtf8Offset } from '@baton/contracts';

/**
 * The error an HTTP body that is not UTF-8 raises while it is read (see {@link requireUtf8Body}):
 * status 400, `type` `entity.invalid_utf8`, `code` `invalid_utf8`. A service's HTTP exception
 * filter turns it into `{ error: { code: 'invalid_utf8' } }`.
 */
export class InvalidUtf8BodyError extends Error {
  override name = 'InvalidUtf8BodyError';
  readonly status = 400;
  readonly statusCode = 400;
  readonly expose = true;
  readonly type = 'entity.invalid_utf8';
  readonly code = 'invalid_utf8';
}

/**
 * The error an HTTP body declared in another charset than UTF-8 raises while it is read: status
 * 415, `type` `charset.unsupported` (the type the body reader gives a charset it cannot decode at
 * all), so the filter answers it `unsupported_charset`.
 */
export class UnsupportedCharsetBodyError extends Error {
  override name = 'UnsupportedCharsetBodyError';
  readonly status = 415;
  readonly statusCode = 415;
  readonly expose = true;
  readonly type = 'charset.unsupported';
  readonly charset: string;
  constructor(charset: string) {
    super(`a body in charset ${JSON.stringify(charset.slice(0, 40))} is not read; send UTF-8`);
    this.charset = charset;
  }
}

/** True for the charsets read as UTF-8 (a JSON or form body with no charset is UTF-8). */
function isUtf8(encoding: string | null | undefined): boolean {
  if (encoding === null || encoding === undefined || encoding === '') return true;
  const e = encoding.toLowerCase();
  return e === 'utf-8' || e === 'utf8';
}

/**
 * A body-parser `verify` hook: refuse a UTF-8 body (JSON, form) whose bytes are not UTF-8 before
 * it is decoded. Without it Express decodes such bytes with U+FFFD in place of each bad one and a
 * handler reads text the client never sent. A body declared in another charset (the reader would
 * decode `utf-16le`, `utf-32`…) is refused: Baton reads UTF-8 only.
 */
export function requireUtf8Body(_req: unknown, _res: unknown, body: Uint8Array, encoding: string | null | undefined): void {
  if (!isUtf8(encoding)) throw new UnsupportedCharsetBodyError(encoding ?? '');
  const at = firstInvalidUtf8Offset(body);
  if (at >= 0) throw new InvalidUtf8BodyError(`the body is not UTF-8 text (the first bad byte is at offset ${at})`);
}
