/**
 * The map's one way to the cloud: the public API under `/api/public` (docs/api/public.md), no
 * credentials. The browser's cache revalidates every answer with its ETag (304s cost little).
 */

export const KINDS = ['temperature', 'humidity', 'pressure', 'co2'] as const;
export type Kind = (typeof KINDS)[number];

export interface Pin {
  id: string;
  lat: number;
  lon: number;
  kind: Kind;
  unit: string;
  value: number;
  ts: string;
  nickname: string;
  locationName: string;
  label: string | null;
}

export interface PinDetail extends Pin {
  model: string;
  vendor: string;
  organisation: string | null;
}

export interface Stats {
  sensors: number;
  locations: number;
  orgs: number;
  lastUpdate: string | null;
}

export interface Reading {
  ts: string;
  value: number;
}

export const METRICS = [
  'coldest_now',
  'hottest_now',
  'highest_co2',
  'active_24h',
  'longest_running',
] as const;
export type Metric = (typeof METRICS)[number];
export type BoardRow = Pin & { rank: number; metric: number };

export const RANGES = ['24h', '7d', '30d'] as const;
export type Range = (typeof RANGES)[number];

async function get<T>(path: string): Promise<T> {
  const res = await fetch(`/api/public${path}`, { headers: { Accept: 'application/json' } });
  if (!res.ok) {
    const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
    throw new Error(body?.error?.message ?? `the server answered ${res.status}`);
  }
  return (await res.json()) as T;
}

export const publicApi = {
  stats: () => get<Stats>('/stats'),
  pins: (kind: Kind | null) => get<Pin[]>(`/sensors${kind ? `?kind=${kind}` : ''}`),
  detail: (id: string) => get<PinDetail>(`/sensors/${encodeURIComponent(id)}`),
  readings: (id: string, range: Range) =>
    get<Reading[]>(`/sensors/${encodeURIComponent(id)}/readings?range=${range}`),
  board: (metric: Metric) => get<BoardRow[]>(`/leaderboards?metric=${metric}`),
  report: async (id: string, reason: string): Promise<void> => {
    const res = await fetch(`/api/public/sensors/${encodeURIComponent(id)}/report`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ reason }),
    });
    if (res.status !== 202) {
      const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
      throw new Error(body?.error?.message ?? `the server answered ${res.status}`);
    }
  },
};
