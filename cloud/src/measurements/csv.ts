import Papa from 'papaparse';

/**
 * CSV text of some rows, RFC 4180 (fields quoted only when they hold a comma, quote, line break or
 * edge space), each line ending in `\n`, so chunks can be concatenated. Written with papaparse: it
 * left a third of csv-stringify's garbage behind in the export (docs/design/reads.md).
 */
export function csvLines(rows: unknown[][]): string {
  return rows.length === 0 ? '' : `${Papa.unparse(rows, { newline: '\n' })}\n`;
}
