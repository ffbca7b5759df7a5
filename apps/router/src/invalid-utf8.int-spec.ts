import { randomBytes } from 'node:crypto';
import { batonStreamNames, connectNats, DlqHeader, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { PublishDefinitionReplySchema } from '@baton/contracts';
import { waitFor } from '@baton/wait';
import { startRouter } from './router.app';
import { deleteStreams } from './int/support';
import { RouterSubjects } from './shared/subjects';

/*
 * The router's inbound decode paths (real NATS): a message whose bytes are not UTF-8 is refused
 * with `invalid_utf8` — its own code, not `malformed_json`, and never decoded with U+FFFD in place
 * of the bad bytes (which, inside a JSON string, used to parse and be acted on) — and recorded as
 * a dead letter with that reason under the consumer's readable source.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `text` with the byte `bad` spliced in at `marker` (the marker itself is removed). */
function withBadByte(text: string, bad: number[], marker = '§'): Uint8Array {
  const [before, after] = text.split(marker) as [string, string];
  return new Uint8Array([...encoder.encode(before), ...bad, ...encoder.encode(after)]);
}

describe('router: invalid UTF-8 is named as such (real NATS)', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let router: RunningService;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter({ ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' });
  }, 20_000);

  afterAll(async () => {
    await router?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 20_000);

  const letters = async () => {
    const stream = batonStreamNames(prefix).dlq;
    const info = await nats.jsm.streams.info(stream);
    const out: Array<{ subject: string; reason: string; source: string; original: string; detail: string; consumer: string; data: Buffer }> = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const msg = await nats.jsm.streams.getMessage(stream, { seq });
      out.push({
        subject: msg.subject,
        reason: msg.header.get(DlqHeader.reason),
        source: msg.header.get(DlqHeader.source),
        original: msg.header.get(DlqHeader.subject),
        detail: msg.header.get(DlqHeader.detail),
        consumer: msg.header.get(DlqHeader.consumer),
        data: Buffer.from(msg.data),
      });
    }
    return out;
  };
  const letterOf = (bytes: Uint8Array) =>
    waitFor(async () => (await letters()).find((l) => l.data.equals(Buffer.from(bytes))), 'the dead letter of those bytes', { timeoutMs: 10_000 });

  it('an agent result with a byte that is not UTF-8 inside a JSON string (valid JSON once replaced) is dead-lettered invalid_utf8 under router-results', async () => {
    const subject = `${prefix}.in.demo.result.architect`;
    const bytes = withBadByte('{"result_id":"r-§","workflow_run_id":"run-1","project":"demo","agent":"architect","body":"done"}', [0xff]);
    await nats.js.publish(subject, bytes);
    const letter = await letterOf(bytes);
    expect(letter).toMatchObject({ subject: `${prefix}.dlq.router-results`, source: 'router-results', reason: 'invalid_utf8', original: subject });
    expect(letter.detail).toContain('not UTF-8');
  });

  it('a run start with an overlong form outside any string (not JSON either) is invalid_utf8, not malformed_json, under router-starts', async () => {
    const subject = `${prefix}.in.demo.start`;
    const bytes = withBadByte('{"workflow_run_id":"run-2","project":"demo","workflow":"w"§}', [0xc0, 0xae]);
    await nats.js.publish(subject, bytes);
    expect(await letterOf(bytes)).toMatchObject({ source: 'router-starts', reason: 'invalid_utf8', original: subject });
  });

  it('a customer message with a cut multi-byte sequence is invalid_utf8 under router-messages', async () => {
    const subject = `${prefix}.in.demo.message`;
    const bytes = withBadByte('{"workflow_run_id":"run-3","project":"demo","message_id":"m-1","text":"caf§"}', [0xc3]);
    await nats.js.publish(subject, bytes);
    expect(await letterOf(bytes)).toMatchObject({ source: 'router-messages', reason: 'invalid_utf8' });
  });

  it('a publish_definition request whose bytes are not UTF-8 is answered invalid_utf8 and dead-lettered under router-definitions', async () => {
    const subject = RouterSubjects.publishDefinition(prefix, 'demo');
    const bytes = withBadByte('{"project":"demo","agents":[{"name":"a§"}],"workflows":[]}', [0xed, 0xa0, 0x80]);
    const reply = await nats.connection.request(subject, bytes, { timeout: 5000 });
    // The reply has the shape publish-definition-reply.json promises for every refusal.
    const body = PublishDefinitionReplySchema.parse(JSON.parse(decoder.decode(reply.data)));
    expect(body).toMatchObject({ ok: false, error: { code: 'invalid_utf8', kind: 'rejection' } });
    expect(await letterOf(bytes)).toMatchObject({
      subject: `${prefix}.dlq.router-definitions`,
      reason: 'invalid_utf8',
      original: subject,
      consumer: router.runtime.instance,
    });
  });

  it('a publish_definition request that is not JSON is answered with the reply schema’s refusal ({ ok: false, error: { code, kind } }) and its letter names the router instance', async () => {
    const subject = RouterSubjects.publishDefinition(prefix, 'demo');
    const bytes = new TextEncoder().encode('{"project":"demo", nope');
    const reply = await nats.connection.request(subject, bytes, { timeout: 5000 });
    const body = PublishDefinitionReplySchema.parse(JSON.parse(decoder.decode(reply.data)));
    expect(body).toMatchObject({ ok: false, error: { code: 'malformed_json', kind: 'rejection' } });
    expect(await letterOf(bytes)).toMatchObject({ reason: 'malformed_json', consumer: router.runtime.instance });
    // A refusal the router decides itself names the instance too.
    const wrong = new TextEncoder().encode(JSON.stringify({ project: 'other', agents: [], workflows: [] }));
    const refused = PublishDefinitionReplySchema.parse(JSON.parse(decoder.decode((await nats.connection.request(subject, wrong, { timeout: 5000 })).data)));
    expect(refused).toMatchObject({ ok: false, error: { kind: 'rejection' } });
    expect(await letterOf(wrong)).toMatchObject({ source: 'router-definitions', consumer: router.runtime.instance });
  });
});
