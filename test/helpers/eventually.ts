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
  for (;;) {
    const value = await check();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > deadline) {
      // After a stall of this process the timer may come before the I/O it was waiting for: let
      // that I/O run, and check once more before failing.
      await new Promise((resolve) => setImmediate(resolve));
      const last = await check();
      if (last !== null && last !== undefined && last !== false) return last;
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
