import { sanityRange, type MeasurementKind } from '../../../shared/kinds.ts';

/**
 * Site verticals and the rule each gives to channels created on its devices
 * (docs/api/resources.md: the table of verticals). "off" = rule disabled, bounds = the sanity range.
 */
export const VERTICALS = [
  'food_service',
  'frozen_storage',
  'pharma',
  'greenhouse',
  'server_room',
  'office',
  'home',
  'generic',
] as const;

export type Vertical = (typeof VERTICALS)[number];

export interface DefaultRule {
  okMin: number;
  okMax: number;
  graceMin: number;
  ruleEnabled: boolean;
}

type RuleSpec = readonly [okMin: number, okMax: number, graceMin: number];

const TABLE: Record<Vertical, Partial<Record<'temperature' | 'humidity' | 'co2', RuleSpec>>> = {
  food_service: { temperature: [0, 5, 30] },
  frozen_storage: { temperature: [-30, -18, 30] },
  pharma: { temperature: [2, 8, 15], humidity: [0, 60, 30] },
  greenhouse: { temperature: [5, 35, 30], humidity: [40, 90, 60] },
  server_room: { temperature: [18, 27, 15], humidity: [20, 80, 30] },
  office: { temperature: [18, 26, 60], humidity: [30, 60, 60], co2: [0, 1000, 30] },
  home: { temperature: [16, 28, 60], humidity: [30, 70, 120], co2: [0, 1400, 30] },
  generic: {},
};

export function isVertical(value: string): value is Vertical {
  return (VERTICALS as readonly string[]).includes(value);
}

/** The rule a new channel of `kind` (with `unit`) gets on a site of `vertical`. */
export function defaultRule(vertical: Vertical, kind: MeasurementKind, unit: string): DefaultRule {
  if (kind === 'leak') return { okMin: 0, okMax: 0, graceMin: 0, ruleEnabled: true };
  if (kind === 'battery') {
    return unit === 'V'
      ? { okMin: 3.0, okMax: 60, graceMin: 60, ruleEnabled: true }
      : { okMin: 20, okMax: 100, graceMin: 60, ruleEnabled: true };
  }
  const spec =
    kind === 'temperature' || kind === 'humidity' || kind === 'co2' ? TABLE[vertical][kind] : undefined;
  if (spec) return { okMin: spec[0], okMax: spec[1], graceMin: spec[2], ruleEnabled: true };
  const range = sanityRange(kind, unit);
  return { okMin: range.min, okMax: range.max, graceMin: 0, ruleEnabled: false };
}
