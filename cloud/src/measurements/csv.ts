import Papa from 'papaparse';

/**
 * A text cell that a spreadsheet would run as a formula: it starts with `=`, `+`, `-`, `@`, tab or
 * carriage return (OWASP, "CSV Injection"). papaparse's own pattern (`/^[=+\-@\t\r].*$/`) misses a
 * cell with a line break, so the test is on the first character only. Numbers are never escaped
 * (papaparse skips number cells), so `-3.5` stays a number.
 */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * CSV text of some rows, RFC 4180 (fields quoted only when they hold a comma, quote, line break or
 * edge space), each line ending in `\n`, so chunks can be concatenated. A text cell that starts like
 * a formula gets a leading `'` and quotes, so a spreadsheet shows it as text (docs/api/reads.md,
 * "Formulas in CSV cells"). Written with papaparse: it left a third of csv-stringify's garbage
 * behind in the export (docs/design/reads.md).
 */
export function csvLines(rows: unknown[][]): string {
  return rows.length === 0 ? '' : `${Papa.unparse(rows, { newline: '\n', escapeFormulae: FORMULA_START })}\n`;
}
