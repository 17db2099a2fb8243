/**
 * Page layout over pdfkit for the report: a cursor that moves down the page, headings, paragraphs,
 * key-value lists and tables whose rows never split and whose header is repeated on each page they
 * run onto. Cell text wraps within its column up to a line limit, then is cut with an ellipsis, so a
 * long label never overlaps its neighbour.
 */
export const PAGE = { width: 595.28, height: 841.89, margin: 40, top: 52, bottom: 60 } as const;

export interface Fonts {
  regular: string;
  bold: string;
}

export interface Column {
  header: string;
  /** Relative width; the table spreads the columns over the content width in proportion. */
  width: number;
  align?: 'left' | 'right' | 'center';
  /** Lines a cell may wrap to before it is cut (default 1). */
  lines?: number;
}

export interface Row {
  cells: string[];
  /** A full-width line under the row (e.g. an acknowledgement note), wrapped, gray. */
  note?: string;
}

const CELL_PAD_X = 3;
const CELL_PAD_Y = 2;
const COLORS = { text: '#111111', muted: '#555555', rule: '#999999', header: '#e6e9ef', zebra: '#f6f7f9' };

export class Layout {
  y = PAGE.top;
  readonly left = PAGE.margin;
  readonly width = PAGE.width - 2 * PAGE.margin;
  readonly bottom = PAGE.height - PAGE.bottom;

  constructor(
    readonly doc: PDFKit.PDFDocument,
    readonly fonts: Fonts,
  ) {}

  newPage(): void {
    this.doc.addPage();
    this.y = PAGE.top;
  }

  /** Starts a new page unless `height` still fits below the cursor. */
  ensure(height: number): void {
    if (this.y + height > this.bottom) this.newPage();
  }

  space(height: number): void {
    this.y += height;
  }

  title(text: string, size = 18): void {
    this.doc.font(this.fonts.bold).fontSize(size).fillColor(COLORS.text);
    const h = this.doc.heightOfString(text, { width: this.width });
    this.doc.text(text, this.left, this.y, { width: this.width });
    this.y += h + 6;
  }

  /** A section heading; it starts a new page when not even its first lines would fit. */
  heading(text: string, size = 12, keepWith = 60): void {
    this.doc.font(this.fonts.bold).fontSize(size);
    const h = this.doc.heightOfString(text, { width: this.width });
    this.ensure(h + keepWith);
    this.doc.fillColor(COLORS.text).text(text, this.left, this.y, { width: this.width });
    this.y += h + 4;
  }

  paragraph(text: string, options: { size?: number; muted?: boolean; bold?: boolean } = {}): void {
    const size = options.size ?? 8.5;
    this.doc.font(options.bold ? this.fonts.bold : this.fonts.regular).fontSize(size);
    const h = this.doc.heightOfString(text, { width: this.width });
    this.ensure(h);
    this.doc.fillColor(options.muted ? COLORS.muted : COLORS.text).text(text, this.left, this.y, {
      width: this.width,
    });
    this.y += h + 3;
  }

  /** Label: value lines, the labels in a column of their own. */
  keyValues(pairs: Array<[string, string]>, labelWidth = 120, size = 9): void {
    const valueWidth = this.width - labelWidth;
    for (const [label, value] of pairs) {
      this.doc.font(this.fonts.regular).fontSize(size);
      const h = Math.max(
        this.doc.heightOfString(value || ' ', { width: valueWidth }),
        this.doc.font(this.fonts.bold).heightOfString(label, { width: labelWidth - 6 }),
      );
      this.ensure(h);
      this.doc
        .font(this.fonts.bold)
        .fillColor(COLORS.text)
        .text(label, this.left, this.y, {
          width: labelWidth - 6,
        });
      this.doc.font(this.fonts.regular).text(value, this.left + labelWidth, this.y, { width: valueWidth });
      this.y += h + 2;
    }
  }

  /** A line of text for a signature or date, with a rule to write on. */
  signatureLine(label: string, lineWidth: number): void {
    this.ensure(34);
    this.doc.font(this.fonts.bold).fontSize(9).fillColor(COLORS.text);
    this.doc.text(label, this.left, this.y + 14, { width: 110, lineBreak: false });
    this.doc
      .lineWidth(0.6)
      .strokeColor(COLORS.rule)
      .moveTo(this.left + 115, this.y + 24)
      .lineTo(this.left + 115 + lineWidth, this.y + 24)
      .stroke();
    this.y += 34;
  }

  /** Cuts `text` with an ellipsis so that it fits `lines` lines of `width` in the current font. */
  fit(text: string, width: number, lines: number): string {
    const doc = this.doc;
    const lineHeight = doc.currentLineHeight(true);
    const fits = (s: string): boolean =>
      lines === 1
        ? doc.widthOfString(s) <= width
        : doc.heightOfString(s, { width }) <= lineHeight * lines + 0.5;
    const clean = lines === 1 ? text.replace(/\s+/g, ' ') : text;
    if (fits(clean)) return clean;
    let lo = 0;
    let hi = clean.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (fits(clean.slice(0, mid) + '…')) lo = mid;
      else hi = mid - 1;
    }
    return clean.slice(0, lo).trimEnd() + '…';
  }

  /**
   * A table: a bold header row on a tinted band, then the rows; a row that does not fit starts a new
   * page, where the header (and the title, marked as continued) is repeated.
   */
  table(
    columns: Column[],
    rows: Row[],
    options: { size?: number; title?: string; continued?: string; empty?: string } = {},
  ): void {
    const doc = this.doc;
    const size = options.size ?? 7.5;
    const total = columns.reduce((s, c) => s + c.width, 0);
    const widths = columns.map((c) => (c.width / total) * this.width);
    const xs: number[] = [];
    widths.reduce((x, w) => (xs.push(x), x + w), this.left);

    // The header's font shrinks until every word of every header fits its column: words never break.
    doc.font(this.fonts.bold);
    let headerSize = size;
    const wordsFit = (): boolean =>
      columns.every((c, i) =>
        c.header
          .split(/\s+|(?<=-)/)
          .every((word) => doc.fontSize(headerSize).widthOfString(word) <= widths[i]! - 2 * CELL_PAD_X),
      );
    while (headerSize > 5.5 && !wordsFit()) headerSize -= 0.25;
    columns.forEach((c, i) =>
      c.header.split(/\s+|(?<=-)/).forEach((w) => {
        const ww = doc.fontSize(6).widthOfString(w);
        if (ww > widths[i]! - 6) console.log('word', w, ww.toFixed(1), (widths[i]! - 6).toFixed(1));
      }),
    );
    doc.fontSize(headerSize);
    const headerCells = columns.map((c, i) => this.fit(c.header, widths[i]! - 2 * CELL_PAD_X, 3));
    const headerHeight =
      Math.max(...headerCells.map((h, i) => doc.heightOfString(h, { width: widths[i]! - 2 * CELL_PAD_X }))) +
      2 * CELL_PAD_Y;

    const drawHeader = (continued: boolean): void => {
      if (options.title) {
        doc.font(this.fonts.bold).fontSize(11).fillColor(COLORS.text);
        const title =
          continued && options.continued ? `${options.title} ${options.continued}` : options.title;
        doc.text(title, this.left, this.y, { width: this.width, lineBreak: false });
        this.y += doc.currentLineHeight(true) + 3;
      }
      doc.rect(this.left, this.y, this.width, headerHeight).fill(COLORS.header);
      doc.font(this.fonts.bold).fontSize(headerSize).fillColor(COLORS.text);
      headerCells.forEach((h, i) => {
        doc.text(h, xs[i]! + CELL_PAD_X, this.y + CELL_PAD_Y, {
          width: widths[i]! - 2 * CELL_PAD_X,
          align: columns[i]!.align ?? 'left',
        });
      });
      this.y += headerHeight;
    };

    const titleHeight = options.title ? 11 * 1.2 + 3 : 0;
    doc.font(this.fonts.regular).fontSize(size);
    const lineHeight = doc.currentLineHeight(true);
    this.ensure(titleHeight + headerHeight + lineHeight + 2 * CELL_PAD_Y);
    drawHeader(false);

    if (rows.length === 0) {
      doc.font(this.fonts.regular).fontSize(size).fillColor(COLORS.muted);
      doc.text(options.empty ?? '–', this.left + CELL_PAD_X, this.y + CELL_PAD_Y, {
        width: this.width - 2 * CELL_PAD_X,
        lineBreak: false,
      });
      this.y += lineHeight + 2 * CELL_PAD_Y;
    }

    rows.forEach((row, r) => {
      doc.font(this.fonts.regular).fontSize(size);
      const cells = row.cells.map((cell, i) =>
        this.fit(cell, widths[i]! - 2 * CELL_PAD_X, columns[i]!.lines ?? 1),
      );
      const cellHeight = Math.max(
        lineHeight,
        ...cells.map((c, i) =>
          (columns[i]!.lines ?? 1) === 1
            ? lineHeight
            : doc.heightOfString(c, { width: widths[i]! - 2 * CELL_PAD_X }),
        ),
      );
      const note = row.note ? this.fit(row.note, this.width - 2 * CELL_PAD_X - 12, 12) : null;
      const noteHeight = note ? doc.heightOfString(note, { width: this.width - 2 * CELL_PAD_X - 12 }) + 1 : 0;
      const rowHeight = cellHeight + noteHeight + 2 * CELL_PAD_Y;
      if (this.y + rowHeight > this.bottom) {
        this.newPage();
        drawHeader(true);
      }
      if (r % 2 === 1) doc.rect(this.left, this.y, this.width, rowHeight).fill(COLORS.zebra);
      doc.font(this.fonts.regular).fontSize(size).fillColor(COLORS.text);
      cells.forEach((c, i) => {
        doc.text(c, xs[i]! + CELL_PAD_X, this.y + CELL_PAD_Y, {
          width: widths[i]! - 2 * CELL_PAD_X,
          align: columns[i]!.align ?? 'left',
        });
      });
      if (note) {
        doc
          .fillColor(COLORS.muted)
          .text(note, this.left + CELL_PAD_X + 12, this.y + CELL_PAD_Y + cellHeight + 1, {
            width: this.width - 2 * CELL_PAD_X - 12,
          });
      }
      this.y += rowHeight;
      doc
        .lineWidth(0.2)
        .strokeColor('#d0d0d0')
        .moveTo(this.left, this.y)
        .lineTo(this.left + this.width, this.y)
        .stroke();
    });
    this.y += 8;
  }
}
