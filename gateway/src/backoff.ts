/**
 * The wait before reconnect attempt `attempt` (0 for the first after a loss): exponential with
 * "equal jitter". The ceiling starts at `minMs` and doubles with each attempt up to `maxMs`; the
 * wait is drawn uniformly from the upper half of the ceiling, so gateways that lost the same
 * broker at the same moment spread out instead of returning in step, and no wait is shorter than
 * half the minimum.
 */
export function backoffDelay(
  attempt: number,
  minMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(Math.max(maxMs, minMs), minMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
