import { describe, expect, it } from '@jest/globals';
import { LineSplitter } from '../../../gateway/src/collectors/serial/line-splitter.ts';

/** Feeds `chunks` through a splitter; answers the lines in order, `OVERLONG` and `UNENDED` where one was dropped. */
function split(chunks: (string | Buffer)[], maxLine = 16): string[] {
  const splitter = new LineSplitter(maxLine);
  const out: string[] = [];
  splitter.on('data', (line: string) => out.push(line));
  splitter.on('overlong', () => out.push('OVERLONG'));
  splitter.on('unended', () => out.push('UNENDED'));
  for (const c of chunks) splitter.write(typeof c === 'string' ? Buffer.from(c) : c);
  splitter.end();
  return out;
}

describe('the serial line splitter', () => {
  it('ends lines at LF, CRLF and a lone CR, across chunks, and skips empty lines', () => {
    expect(split(['T=4.5\r\nH=', '60\rT=4.', '6\n\n\r\nT=2'])).toEqual(['T=4.5', 'H=60', 'T=4.6', 'UNENDED']);
  });

  it('keeps a UTF-8 character split between two reads', () => {
    const bytes = Buffer.from('t=4.5°C\n');
    const cut = bytes.indexOf(0xb0);
    expect(split([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(['t=4.5°C']);
  });

  it('drops a line past the bound as it comes, reports it once at its end, and goes on', () => {
    const garbage = Array.from({ length: 10_000 }, () => 'x'.repeat(100));
    expect(split(['ok-1\n', ...garbage, 'tail\nok-2\n'])).toEqual(['ok-1', 'OVERLONG', 'ok-2']);
    expect(split(['0123456789abcdefg\nok\n'])).toEqual(['OVERLONG', 'ok']);
    expect(split(['0123456789abcdef\n'])).toEqual(['0123456789abcdef']);
  });

  it('holds no more than the bound of a line without an end', () => {
    const splitter = new LineSplitter(16);
    for (let i = 0; i < 1000; i++) splitter.write(Buffer.from('y'.repeat(1000)));
    expect((splitter as unknown as { pending: string }).pending.length).toBeLessThanOrEqual(16);
  });
});
