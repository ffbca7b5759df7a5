import { appendedPastState } from './backup';

const state = (messages: number, first_seq: number, last_seq: number) => ({ messages, first_seq, last_seq });

describe('appendedPastState: a restored stream against the state its backup recorded', () => {
  it('is 0 for the very state', () => {
    expect(appendedPastState(state(62, 1, 62), state(62, 1, 62))).toBe(0);
    expect(appendedPastState(state(40, 23, 62), state(40, 23, 62))).toBe(0);
  });

  it('counts messages appended while the server read the stream: a contiguous run past the recorded last_seq', () => {
    expect(appendedPastState(state(62, 1, 62), state(65, 1, 65))).toBe(3);
    expect(appendedPastState(state(40, 23, 62), state(41, 23, 63))).toBe(1);
  });

  it('refuses fewer messages, another first sequence, or a gap (null: not the backup)', () => {
    expect(appendedPastState(state(62, 1, 62), state(61, 1, 61))).toBeNull();
    expect(appendedPastState(state(62, 1, 62), state(62, 2, 63))).toBeNull();
    expect(appendedPastState(state(62, 1, 62), state(63, 1, 65))).toBeNull();
    expect(appendedPastState(state(62, 1, 62), state(62, 1, 63))).toBeNull();
    // The manifest edited to say one message more than the snapshot holds.
    expect(appendedPastState(state(5, 1, 5), state(4, 1, 5))).toBeNull();
  });

  it('takes an empty stream whatever first sequence the server says of it (0, or last + 1), and what was appended to it', () => {
    expect(appendedPastState(state(0, 0, 0), state(0, 0, 0))).toBe(0);
    expect(appendedPastState(state(0, 0, 7), state(0, 8, 7))).toBe(0);
    expect(appendedPastState(state(0, 8, 7), state(2, 8, 9))).toBe(2);
    expect(appendedPastState(state(0, 0, 7), state(2, 3, 9))).toBeNull();
  });
});
