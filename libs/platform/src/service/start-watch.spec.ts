import { StartWatch } from './start-watch';

type Line = { message: string; fields: Record<string, unknown> };

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wait until `lines` has more than `count` lines (at most a second). */
async function moreThan(lines: Line[], count: number): Promise<void> {
  const deadline = Date.now() + 1_000;
  while (lines.length <= count && Date.now() < deadline) await wait(5);
}

describe('StartWatch: a slow start says which step it waits in', () => {
  it('writes nothing when the start is done before the first period', async () => {
    const lines: Line[] = [];
    const watch = new StartWatch('ledger', { everyMs: 40 });
    watch.attach({ warn: (message, fields) => lines.push({ message, fields }) });
    watch.enter('streams');
    watch.done();
    await wait(120);
    expect(lines).toEqual([]);
    expect(watch.lines()).toBe(0);
  });

  it('names the step it is in, how long the start and the step took, every period until done', async () => {
    let clock = 1_000;
    const lines: Line[] = [];
    const watch = new StartWatch('ledger', { everyMs: 30, now: () => clock });
    watch.attach({ warn: (message, fields) => lines.push({ message, fields }) });
    clock += 2_000;
    watch.enter('consumers');
    clock += 10_500;
    await moreThan(lines, 0);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    for (const line of lines) {
      expect(line).toEqual({
        message: 'ledger is not ready after 13 s: creating its JetStream consumers and subscriptions',
        fields: { start_phase: 'consumers', waited_ms: 12_500, phase_ms: 10_500 },
      });
    }
    watch.enter('hooks');
    clock += 1_000;
    const before = lines.length;
    await moreThan(lines, before);
    expect(lines.length).toBeGreaterThan(before);
    expect(lines.at(-1)?.fields).toEqual({ start_phase: 'hooks', waited_ms: 13_500, phase_ms: 1_000 });
    watch.done();
    const written = lines.length;
    await wait(100);
    expect(lines).toHaveLength(written);
    expect(watch.lines()).toBe(written);
  });

  it('writes nothing before a logger is attached (the configuration is still read), then does', async () => {
    const lines: Line[] = [];
    const watch = new StartWatch('router', { everyMs: 20 });
    await wait(50);
    expect(watch.lines()).toBe(0);
    watch.attach({ warn: (message, fields) => lines.push({ message, fields }) });
    await moreThan(lines, 0);
    watch.done();
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines[0]?.fields['start_phase']).toBe('nats');
    expect(lines[0]?.message).toMatch(/^router is not ready after \d+ s: connecting to NATS$/);
  });
});
