'use strict';
// How `npm start` shows the services' log lines. Each service logs one JSON object per line; on a
// terminal (and unless LOG_FORMAT=json) a line is shown as `time LEVEL message key=value…`, with
// colours; piped or redirected, or with LOG_FORMAT=json, the JSON is kept as it is.

const LEVEL_COLOURS = { debug: '\u001b[90m', info: '\u001b[36m', warn: '\u001b[33m', error: '\u001b[31m' };
const RESET = '\u001b[0m';
const GREY = '\u001b[90m';

/**
 * @param {string} line one line a service wrote
 * @param {{ terminal: boolean, format?: string }} options where it goes, and LOG_FORMAT
 * @returns {string} the line to print
 */
function readableLogLine(line, options) {
  if (!options.terminal || options.format === 'json' || !line.startsWith('{')) return line;
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return line;
  const { time, level, msg, service: _service, instance: _instance, ...rest } = entry;
  const clock = typeof time === 'string' ? time.slice(11, 23) : '';
  const colour = LEVEL_COLOURS[level] || '';
  const fields = Object.entries(rest)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? (/\s/.test(value) ? JSON.stringify(value) : value) : JSON.stringify(value)}`)
    .join(' ');
  return `${clock} ${colour}${String(level || '').toUpperCase().padEnd(5)}${RESET} ${msg ?? ''}${fields ? `  ${GREY}${fields}${RESET}` : ''}`;
}

module.exports = { readableLogLine };
