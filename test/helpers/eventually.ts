/**
 * Waits for a condition that becomes true through another process or connection (a broker noticing
 * a closed socket, a bridge connecting), checking again after each short pause; fails after `ms`.
 */
export async function eventually<T>(
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  what: string,
  ms = 10_000,
  /** Between checks; a check through the API is rate-limited like any client's. */
  pauseMs = 25,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last = false;
  for (;;) {
    const value = await check();
    if (value !== null && value !== undefined && value !== false) return value;
    if (last) throw new Error(`timed out waiting for ${what}`);
    // After a stall of this process the timer may come before the I/O it was waiting for: past the
    // deadline, let that I/O run and check once more before failing.
    last = Date.now() > deadline;
    await new Promise((resolve) => (last ? setImmediate(resolve) : setTimeout(resolve, pauseMs)));
  }
}
