import type { DerivedEvent, EventKind } from './derive.ts';

/** An event as stored, reduced to what derivation decides. */
export interface StoredEvent {
  id: string;
  kind: EventKind;
  startedAt: number;
  alarmAt: number;
  endedAt: number | null;
  peak: number | null;
  okMin: number;
  okMax: number;
  silenced: boolean;
  withdrawn: boolean;
}

export interface Desired extends DerivedEvent {
  silenced: boolean;
}

export interface Reconciliation {
  insert: Desired[];
  /** Stored events that now read differently (a later sample ended it, a late one moved its start...). */
  update: { id: string; to: Desired; reinstate: boolean }[];
  /** Stored events the data no longer supports (late samples showed the excursion was shorter). */
  withdraw: string[];
  /** Stored events that match exactly. */
  unchanged: string[];
}

function same(a: StoredEvent, b: Desired): boolean {
  return (
    a.startedAt === b.startedAt &&
    a.alarmAt === b.alarmAt &&
    a.endedAt === b.endedAt &&
    a.peak === b.peak &&
    a.okMin === b.okMin &&
    a.okMax === b.okMax &&
    a.silenced === b.silenced
  );
}

const overlaps = (a: { startedAt: number; endedAt: number | null }, b: typeof a) =>
  a.startedAt < (b.endedAt ?? Infinity) && b.startedAt < (a.endedAt ?? Infinity);

/**
 * Makes the stored events of a window equal to the derived ones while keeping identities: an event
 * keeps its id (and its acknowledgement) when the same excursion is seen again with more data, and
 * an event the data no longer supports is withdrawn (kept, flagged), never deleted.
 * Matching: first by (kind, started_at), the unique key, withdrawn events included; then an
 * excursion of the same kind that overlaps in time.
 */
export function reconcile(stored: readonly StoredEvent[], desired: readonly Desired[]): Reconciliation {
  const result: Reconciliation = { insert: [], update: [], withdraw: [], unchanged: [] };
  const taken = new Set<string>();
  const rest: Desired[] = [];
  const byKey = new Map(stored.map((e) => [`${e.kind}:${e.startedAt}`, e]));
  for (const d of desired) {
    const match = byKey.get(`${d.kind}:${d.startedAt}`);
    if (!match) {
      rest.push(d);
      continue;
    }
    taken.add(match.id);
    if (match.withdrawn) result.update.push({ id: match.id, to: d, reinstate: true });
    else if (same(match, d)) result.unchanged.push(match.id);
    else result.update.push({ id: match.id, to: d, reinstate: false });
  }
  const live = stored
    .filter((e) => !e.withdrawn && !taken.has(e.id))
    .sort((a, b) => a.startedAt - b.startedAt);
  for (const d of rest) {
    const match = live.find((e) => !taken.has(e.id) && e.kind === d.kind && overlaps(e, d));
    if (match) {
      taken.add(match.id);
      result.update.push({ id: match.id, to: d, reinstate: false });
    } else {
      result.insert.push(d);
    }
  }
  for (const e of live) if (!taken.has(e.id)) result.withdraw.push(e.id);
  return result;
}
