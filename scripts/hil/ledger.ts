/**
 * The rig's end-to-end check: what each source was told was accepted (its ledger) against what
 * the cloud's API returns. A reading is "accepted" when its source got the gateway's (or, for
 * LoRaWAN, the network server's) acknowledgement: HTTP 200 for a Shelly Gen1, PUBACK for a Shelly
 * Plus and a ChirpStack uplink; a serial line is accepted once written to the line (a serial
 * sensor gets no answer). Every accepted reading must be in the cloud exactly once; a reading the
 * cloud has that no source sent is unexpected. A reading sent but not acknowledged (the device
 * timed out) may or may not arrive: either is right.
 */

/** The emulated site's devices, by their ids in the cloud. */
export const SITE_DEVICES = {
  gen1: 'shellyht-EE45E9',
  plus: 'shellyplusht-08b61fcb7f3c',
  serial: 'cellar-probe',
  chirpstack: 'a84041000181c0de',
} as const;

export type Source = 'shelly-gen1' | 'shelly-plus' | 'serial' | 'chirpstack';

export interface LedgerEntry {
  source: Source;
  /** The device's id in the cloud (its local id). */
  device: string;
  kind: string;
  label: string | null;
  /** null: the observer does not know the value (a real device's codec): only the time is checked. */
  value: number | null;
  /** The reading's own time, ms since the epoch, when the device sends one; null: the gateway's receive time. */
  ts: number | null;
  accepted: boolean;
}

export interface CloudPoint {
  device: string;
  kind: string;
  label: string | null;
  /** ms since the epoch */
  ts: number;
  value: number;
}

export interface DeviceCheck {
  device: string;
  source: Source;
  sent: number;
  accepted: number;
  inCloud: number;
  /** Accepted, not in the cloud. */
  lost: number;
  /** The same reading more than once in the cloud. */
  duplicated: number;
  /** In the cloud, never sent (or a wrong value for a sent time). */
  unexpected: number;
}

export interface CheckResult {
  ok: boolean;
  devices: DeviceCheck[];
}

const same = (a: number, b: number) => Math.abs(a - b) < 1e-6;

function checkDevice(entries: LedgerEntry[], points: CloudPoint[]): DeviceCheck {
  const first = entries[0]!;
  const accepted = entries.filter((e) => e.accepted);
  const result: DeviceCheck = {
    device: first.device,
    source: first.source,
    sent: entries.length,
    accepted: accepted.length,
    inCloud: points.length,
    lost: 0,
    duplicated: 0,
    unexpected: 0,
  };
  if (first.ts !== null) {
    // Readings with their own time: matched by time (the cloud keeps one per device, time and channel).
    const sentByTs = new Map(entries.map((e) => [e.ts!, e]));
    const seen = new Map<number, number>();
    for (const p of points) {
      seen.set(p.ts, (seen.get(p.ts) ?? 0) + 1);
      const sent = sentByTs.get(p.ts);
      if (!sent || (sent.value !== null && !same(sent.value, p.value))) result.unexpected++;
    }
    for (const n of seen.values()) if (n > 1) result.duplicated += n - 1;
    for (const e of accepted) if (!seen.has(e.ts!)) result.lost++;
    return result;
  }
  // Readings timed by the gateway on receipt: matched by value, as multisets (each cloud point
  // takes an accepted reading of its value first, else one sent but not acknowledged).
  const take = (pool: number[], value: number) => {
    const i = pool.findIndex((v) => same(v, value));
    if (i === -1) return false;
    pool.splice(i, 1);
    return true;
  };
  const valueOf = (e: LedgerEntry) => e.value ?? Number.NaN;
  const acceptedPool = accepted.map(valueOf);
  const unackedPool = entries.filter((e) => !e.accepted).map(valueOf);
  const allSent = entries.map(valueOf);
  for (const p of points) {
    if (take(acceptedPool, p.value) || take(unackedPool, p.value)) continue;
    if (allSent.some((v) => same(v, p.value))) result.duplicated++;
    else result.unexpected++;
  }
  result.lost = acceptedPool.length;
  return result;
}

/** Compares the ledgers with the cloud's points, device by device (on each device's ledger channel). */
export function compareLedger(ledger: LedgerEntry[], points: CloudPoint[]): CheckResult {
  const byDevice = new Map<string, LedgerEntry[]>();
  for (const e of ledger) byDevice.set(e.device, [...(byDevice.get(e.device) ?? []), e]);
  const devices = [...byDevice.values()].map((entries) => {
    const { device, kind, label } = entries[0]!;
    return checkDevice(
      entries,
      points.filter((p) => p.device === device && p.kind === kind && p.label === label),
    );
  });
  const ok =
    devices.length > 0 &&
    devices.every((d) => d.accepted > 0 && d.lost === 0 && d.duplicated === 0 && d.unexpected === 0);
  return { ok, devices };
}
