import type { Kind, Metric } from './public-api.ts';

export const KIND_NAMES: Record<Kind, string> = {
  temperature: 'Temperature',
  humidity: 'Humidity',
  pressure: 'Pressure',
  co2: 'CO₂',
};

export const METRIC_NAMES: Record<Metric, string> = {
  coldest_now: 'Coldest now',
  hottest_now: 'Hottest now',
  highest_co2: 'Highest CO₂',
  active_24h: 'Most readings (24 h)',
  longest_running: 'Longest running',
};

/** A value with its unit, to a sensible precision. */
export function formatValue(value: number, unit: string): string {
  const digits = Math.abs(value) >= 100 ? 0 : 1;
  const text = value.toLocaleString('en-GB', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit === '%' ? `${text} %` : `${text} ${unit}`;
}

/** A timestamp in the reader's own time zone, to the minute. */
export function formatTime(ts: string): string {
  return new Date(ts).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });
}

/** A board's metric as a reader says it. */
export function formatMetric(metric: Metric, value: number, unit: string): string {
  if (metric === 'active_24h') return `${value} readings`;
  if (metric === 'longest_running') {
    const days = Math.floor(value / 86_400);
    const hours = Math.floor((value % 86_400) / 3600);
    return days > 0 ? `${days} d ${hours} h` : `${hours} h ${Math.floor((value % 3600) / 60)} min`;
  }
  return formatValue(value, unit);
}
