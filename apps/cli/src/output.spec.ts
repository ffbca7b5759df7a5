import { renderFields, renderTable } from './output';

describe('tables and fields show stored text, never let it steer the terminal', () => {
  const steering = 'A\u0000B\u0007C\u001b[31mRED\u001b[0m D\u202eEVIL\u202c E\u007f F\u009b2J';

  it('control characters are shown as their pictures (␀ ␇ ␛ ␡), C1 controls and bidi overrides as �; line breaks and tabs become spaces as before', () => {
    const table = renderTable(
      [{ reason: steering, note: 'one\ntwo\tthree' }],
      [
        { header: 'reason', value: (r) => r.reason, max: 200 },
        { header: 'note', value: (r) => r.note },
      ],
    );
    expect(table.split('\n')[1]).toBe('A␀B␇C␛[31mRED␛[0m D�EVIL� E␡ F�2J  one two three');
    // eslint-disable-next-line no-control-regex -- the test looks for control characters
    expect(table).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(renderFields({ reason: steering })).toBe('reason: A␀B␇C␛[31mRED␛[0m D�EVIL� E␡ F�2J\n');
  });
});
