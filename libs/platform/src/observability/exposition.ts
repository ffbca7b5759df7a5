/** A label value to match: equal to a string, or matching a pattern. */
export type LabelMatch = string | RegExp;

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * The values of the samples `name{labels} value` in a Prometheus text exposition (what `GET
 * /metrics` answers) whose labels match every given pair, in the order they appear. For the
 * bench, the scale test and tests that read a service's metrics from outside.
 */
export function metricSamples(text: string, name: string, labels: Record<string, LabelMatch> = {}): number[] {
  const values: number[] = [];
  const wanted = Object.entries(labels);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    let labelText = '';
    let valueText: string;
    if (rest.startsWith('{')) {
      const close = rest.lastIndexOf('}');
      if (close < 0) continue;
      labelText = rest.slice(1, close);
      valueText = rest.slice(close + 1).trim();
    } else if (rest.startsWith(' ')) {
      valueText = rest.trim();
    } else {
      continue; // another metric whose name starts with this one
    }
    const have = new Map<string, string>();
    for (const match of labelText.matchAll(LABEL))
      have.set(
        match[1] as string,
        (match[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c)),
      );
    const matches = wanted.every(([key, want]) => {
      const value = have.get(key);
      return value !== undefined && (typeof want === 'string' ? value === want : want.test(value));
    });
    if (matches) values.push(Number(valueText.split(' ')[0]));
  }
  return values;
}

/** The first matching sample's value (see {@link metricSamples}), or undefined when none matches. */
export function metricSample(text: string, name: string, labels: Record<string, LabelMatch> = {}): number | undefined {
  return metricSamples(text, name, labels)[0];
}
