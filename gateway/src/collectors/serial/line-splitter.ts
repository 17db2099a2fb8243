import { StringDecoder } from 'node:string_decoder';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * Splits a serial byte stream into lines ending in `\n`, `\r\n` or a lone `\r` (some sensors end
 * lines with CR only), holding at most `maxLine` characters of a line not yet ended: past that, the
 * rest of the line is dropped as it comes and `overlong` is emitted once when its end arrives. A
 * wrong baud rate or a line without any end would otherwise grow the buffer (and the search for an
 * end in it) without limit. Empty lines are not emitted, nor is a line the stream ends in the middle
 * of (a port unplugged mid-line: `temperature=2` of `temperature=23.5`), which emits `unended`.
 */
export class LineSplitter extends Transform {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private dropping = false;

  constructor(private readonly maxLine: number) {
    super({ readableObjectMode: true });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.split(this.decoder.write(chunk));
    done();
  }

  override _flush(done: TransformCallback): void {
    this.split(this.decoder.end());
    if (this.dropping || this.pending !== '') this.emit('unended');
    this.pending = '';
    done();
  }

  private split(text: string): void {
    let start = 0;
    for (;;) {
      const end = nextLineEnd(text, start);
      if (end === -1) break;
      this.line(text.slice(start, end));
      start = end + 1;
    }
    const rest = text.slice(start);
    if (this.dropping) return;
    if (this.pending.length + rest.length > this.maxLine) {
      this.pending = '';
      this.dropping = true;
    } else {
      this.pending += rest;
    }
  }

  private line(tail: string): void {
    if (this.dropping) {
      this.dropping = false;
      this.emit('overlong');
      return;
    }
    const line = this.pending + tail;
    this.pending = '';
    if (line.length > this.maxLine) this.emit('overlong');
    else if (line !== '') this.push(line);
  }
}

function nextLineEnd(text: string, from: number): number {
  const n = text.indexOf('\n', from);
  const r = text.indexOf('\r', from);
  if (n === -1) return r;
  if (r === -1) return n;
  return Math.min(n, r);
}
