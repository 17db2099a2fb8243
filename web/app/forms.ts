/** Small helpers the sensor and alarm pages share for times in forms. */

/**
 * A `datetime-local` input's value for a time (the browser's own time zone), to the minute or, with
 * `seconds`, to the second (for an input with `step="1"`).
 */
export function toLocalInput(ms: number, seconds = false): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  const minute = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return seconds ? `${minute}:${pad(d.getSeconds())}` : minute;
}

/**
 * A `datetime-local` value as RFC 3339 UTC for the API, or the text as typed when it is not a time
 * (the API then answers with its own message for the field).
 */
export function fromLocalInput(value: string): string {
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? new Date(ms).toISOString() : value;
}

/** The first of `fields` an error names, so its message is shown next to that field only. */
export function fieldOf(
  error: { fieldMessage(field: string): string | null } | null,
  fields: readonly string[],
): { field: string; message: string } | null {
  if (!error) return null;
  for (const field of fields) {
    const message = error.fieldMessage(field);
    if (message) return { field, message };
  }
  return null;
}
