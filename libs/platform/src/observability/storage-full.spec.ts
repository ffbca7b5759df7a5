import { StorageFull } from '@baton/eventstore';
import { StorageFullWatch } from './storage-full';

/*
 * The storage watch's log is bounded (SRE audit finding 3): a line when a limit starts refusing, at
 * most one summary a window with the count held back, a line when it ends; every refusal counted
 * in exactly one line. A limit that flaps writes at most three lines a window.
 */

const P = 'tsf';
const INBOX = 'TSF_INBOX';
const offer = `${P}.in.shop.offer.bob`;
const fullInbox = new StorageFull(offer, 'stream_bytes');
const fullAccount = new StorageFull(`${P}.ev.shop.handoff.h1`, 'account_storage');

function watchAt(windowMs = 1_000) {
  let now = 0;
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
  const counted: string[] = [];
  const watch = new StorageFullWatch(
    { info: (msg, fields) => lines.push({ level: 'info', msg, fields }), warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }) },
    { prefix: P, windowMs, now: () => now, onRefused: (limit) => counted.push(limit) },
  );
  return { watch, lines, counted, at: (t: number) => (now = t) };
}

describe('StorageFullWatch', () => {
  it('a condition that lasts: one start line, one summary a window with the refusals held back, one end line; each refusal in one line', () => {
    const { watch, lines, counted, at } = watchAt();
    for (let t = 0; t < 500; t++) {
      at(t);
      watch.refused(offer, fullInbox);
    }
    expect(lines.map((l) => l.msg)).toEqual(['storage full: publishes refused; the platform waits with them until room is made (docs/sre.md, Capacity)']);
    expect(lines[0]?.fields).toMatchObject({ limit: 'stream_bytes', stream: INBOX, subject: offer });
    // The next window's first refusal hands back the last window's summary.
    at(1_000);
    watch.refused(offer, fullInbox);
    at(1_001);
    watch.refused(offer, fullInbox);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 'warn', msg: 'storage still full: publishes refused', fields: { full: true, held_back: 499, refused: 500 } });
    expect(watch.status()).toMatchObject({ full: true, conditions: [{ limit: 'stream_bytes', stream: INBOX, refused: 502, last_subject: offer }] });
    expect(watch.full('stream_bytes')).toBe(true);
    expect(watch.full('account_storage')).toBe(false);
    // Another stream stored a message: the inbox is still full.
    watch.stored('TSF_EVENTS');
    expect(watch.status().full).toBe(true);
    watch.stored(INBOX);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ level: 'info', msg: 'storage full no longer: a publish was stored', fields: { refused: 502, held_back: 2 } });
    expect(1 + 499 + 2).toBe(counted.length);
    expect(watch.status()).toEqual({ full: false, conditions: [] });
    watch.stop();
    expect(lines).toHaveLength(3);
  });

  it('a limit that flaps (a small publish fits, the next does not) writes at most three lines a window, and the summary counts the rest', () => {
    const { watch, lines, counted, at } = watchAt();
    for (let t = 0; t < 900; t += 3) {
      at(t);
      watch.refused(offer, fullInbox);
      watch.refused(offer, fullInbox);
      watch.stored(INBOX);
    }
    expect(lines.map((l) => l.level)).toEqual(['warn', 'info']);
    at(1_000);
    watch.stop();
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ msg: 'storage was full: publishes refused', fields: { full: false, held_back: counted.length - 2 } });
  });

  it("a full account is one condition whoever refuses (any stream's publish ends it); refusals other than a storage limit's are not counted", () => {
    const { watch, lines, counted } = watchAt();
    watch.refused(`${P}.ev.shop.handoff.h1`, fullAccount);
    watch.refused(offer, fullAccount);
    watch.refused(offer, new Error('timeout'));
    expect(counted).toEqual(['account_storage', 'account_storage']);
    expect(watch.status().conditions).toEqual([expect.objectContaining({ limit: 'account_storage', stream: null, refused: 2 })]);
    watch.stored('TSF_DLQ');
    expect(lines.map((l) => l.level)).toEqual(['warn', 'info']);
    expect(lines[1]?.fields).toMatchObject({ limit: 'account_storage', refused: 2, held_back: 1 });
    watch.stop();
  });
});
