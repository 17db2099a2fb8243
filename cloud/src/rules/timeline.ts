import { MICROS_PER_MINUTE } from '../../../shared/time.ts';

/** A sensor's simple rule (docs/api/rules.md). */
export interface Rule {
  okMin: number;
  okMax: number;
  graceMin: number;
  enabled: boolean;
  noDataMin: number;
}

export interface RuleVersion extends Rule {
  /** Microseconds; the rule applies to measurements with `ts >= validFrom`. */
  validFrom: number;
}

export const BEGINNING = Number.MIN_SAFE_INTEGER;

export function graceMicros(rule: Rule): number {
  return rule.graceMin * MICROS_PER_MINUTE;
}

export function noDataMicros(rule: Rule): number {
  return rule.noDataMin * MICROS_PER_MINUTE;
}

/**
 * The rules of one channel over measurement time: each measurement is judged by the rule in force
 * at its own `ts`, so late data gets the bounds of its time and a rule change never rewrites the
 * past. After `endsAt` (the device was deleted) the rule counts as disabled.
 */
export class RuleTimeline {
  private readonly versions: RuleVersion[];

  /** `versions` in any order; the earliest one applies from the beginning of time. */
  constructor(versions: readonly RuleVersion[], endsAt: number | null = null) {
    const sorted = [...versions].sort((a, b) => a.validFrom - b.validFrom);
    if (sorted.length === 0) throw new Error('a rule timeline needs at least one rule');
    sorted[0] = { ...sorted[0]!, validFrom: BEGINNING };
    if (endsAt !== null) {
      const last = sorted.filter((v) => v.validFrom <= endsAt).pop()!;
      const kept = sorted.filter((v) => v.validFrom < endsAt);
      kept.push({ ...last, validFrom: endsAt, enabled: false });
      this.versions = kept;
    } else {
      this.versions = sorted;
    }
  }

  static constant(rule: Rule, endsAt: number | null = null): RuleTimeline {
    return new RuleTimeline([{ ...rule, validFrom: BEGINNING }], endsAt);
  }

  /** Whether the rule is disabled at every moment (then no event can ever arise). */
  get alwaysDisabled(): boolean {
    return this.versions.every((v) => !v.enabled);
  }

  at(ts: number): Rule {
    const v = this.versions;
    let lo = 0;
    let hi = v.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (v[mid]!.validFrom <= ts) lo = mid;
      else hi = mid - 1;
    }
    return v[lo]!;
  }

  /** The first moment in (from, to] at which the rule becomes disabled, or null. */
  firstDisabledAfter(from: number, to: number): number | null {
    for (const v of this.versions) {
      if (v.validFrom > from && v.validFrom <= to && !v.enabled) return v.validFrom;
    }
    return null;
  }

  /**
   * The maximal intervals of [from, to) in which the rule is enabled, each with the rule in force at
   * its start (consecutive enabled versions form one interval: a change of bounds does not split a
   * stretch without data into two no-data events).
   */
  enabledIntervals(from: number, to: number): { start: number; end: number; rule: Rule }[] {
    const out: { start: number; end: number; rule: Rule }[] = [];
    let open: { start: number; rule: Rule } | null = null;
    this.versions.forEach((v, i) => {
      const segStart = Math.max(v.validFrom, from);
      const segEnd = Math.min(this.versions[i + 1]?.validFrom ?? Infinity, to);
      if (segStart >= segEnd) return;
      if (v.enabled) {
        open ??= { start: segStart, rule: v };
      } else if (open) {
        out.push({ start: open.start, end: segStart, rule: open.rule });
        open = null;
      }
    });
    if (open !== null) {
      const last: { start: number; rule: Rule } = open;
      out.push({ start: last.start, end: to, rule: last.rule });
    }
    return out;
  }

  /** Version boundaries after `ts` (for the next time the state can change on its own). */
  nextBoundaryAfter(ts: number): number | null {
    for (const v of this.versions) if (v.validFrom > ts) return v.validFrom;
    return null;
  }
}
