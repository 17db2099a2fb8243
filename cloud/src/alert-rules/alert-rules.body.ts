import { IANAZone } from 'luxon';
import { z } from 'zod';
import { WEEKDAYS } from './alert-schedule.ts';

/**
 * The alert rule body (docs/api/alert-rules.md), as validated on POST and, merged with the rule as
 * it is, on PATCH. Numbers out of their range and unknown fields are 400 `invalid_request`;
 * `outside` with `min >= max` is 422 `invalid_range` (the service checks it).
 */

const severity = z.enum(['warning', 'critical']);
const hysteresis = z.number().min(0).max(1e6).default(0);
const delay = z.number().int().min(0).max(1440).default(0);
const finite = z.number().min(-1e9).max(1e9);

export const ConditionBody = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('above'), value: finite, hysteresis, delay_min: delay, severity }),
  z.strictObject({ type: z.literal('below'), value: finite, hysteresis, delay_min: delay, severity }),
  z.strictObject({
    type: z.literal('outside'),
    min: finite,
    max: finite,
    hysteresis,
    delay_min: delay,
    severity,
  }),
  z.strictObject({ type: z.literal('no_data'), minutes: z.number().int().min(1).max(10080), severity }),
  z.strictObject({
    type: z.literal('rate_of_change'),
    change: z.number().positive().max(1e9),
    within_min: z.number().int().min(1).max(1440),
    direction: z.enum(['rise', 'fall', 'any']).default('any'),
    hysteresis,
    delay_min: delay,
    severity,
  }),
]);

const clock = /^([01]\d|2[0-3]):[0-5]\d$/;
export const ScheduleBody = z.strictObject({
  timezone: z.string().refine((tz) => IANAZone.isValidZone(tz), 'an IANA time zone, e.g. Europe/Berlin'),
  windows: z
    .array(
      z
        .strictObject({
          days: z
            .array(z.enum(WEEKDAYS))
            .min(1)
            .max(7)
            .refine((d) => new Set(d).size === d.length, 'each day once'),
          from: z.string().regex(clock, 'HH:MM'),
          to: z.string().refine((t) => clock.test(t) || t === '24:00', 'HH:MM or 24:00'),
        })
        .refine((w) => w.from !== w.to, 'from and to differ'),
    )
    .min(1)
    .max(28),
});

export const CHAT_TYPES = ['slack', 'teams', 'ntfy'] as const;

export const StepBody = z.strictObject({
  after_min: z.number().int().min(0).max(10080),
  user_ids: z.array(z.string().max(64)).max(50).default([]),
  webhook_ids: z.array(z.string().max(64)).max(20).default([]),
  chat: z
    .array(z.strictObject({ type: z.enum(CHAT_TYPES), url: z.url({ protocol: /^https?$/ }).max(2000) }))
    .max(10)
    .default([]),
});

export const NotifyBody = z
  .strictObject({
    steps: z.array(StepBody).max(10).default([]),
    repeat_every_min: z.number().int().min(1).max(10080).nullable().default(null),
  })
  .refine(
    (n) => n.steps.every((s, i) => i === 0 || s.after_min > n.steps[i - 1]!.after_min),
    'steps in order of after_min, each later than the one before',
  );

/** The whole rule; exactly one of `channel_ids` or `site_id` with `kind`. */
export const AlertRuleBody = z
  .strictObject({
    name: z.string().min(1).max(120),
    enabled: z.boolean().default(true),
    channel_ids: z.array(z.string().min(1).max(64)).min(1).max(100).nullable().optional(),
    site_id: z.string().min(1).max(64).nullable().optional(),
    kind: z.string().min(1).max(64).nullable().optional(),
    conditions: z.array(ConditionBody).min(1).max(10),
    schedule: ScheduleBody.nullable().default(null),
    notify: NotifyBody.default({ steps: [], repeat_every_min: null }),
  })
  .refine(
    (r) => (r.channel_ids ? !r.site_id && !r.kind : Boolean(r.site_id) && Boolean(r.kind)),
    'either channel_ids, or site_id with kind',
  );

export type AlertRuleInput = z.infer<typeof AlertRuleBody>;
export type NotifyInput = z.infer<typeof NotifyBody>;
export type StepInput = z.infer<typeof StepBody>;

/** PATCH: any of the fields; `channel_ids` replaces a site scope and `site_id`/`kind` a channel list. */
export const AlertRulePatch = z.strictObject({
  name: z.string().min(1).max(120).optional(),
  enabled: z.boolean().optional(),
  channel_ids: z.array(z.string().min(1).max(64)).min(1).max(100).optional(),
  site_id: z.string().min(1).max(64).optional(),
  kind: z.string().min(1).max(64).optional(),
  conditions: z.array(ConditionBody).min(1).max(10).optional(),
  schedule: ScheduleBody.nullable().optional(),
  notify: NotifyBody.optional(),
});
export type AlertRulePatchInput = z.infer<typeof AlertRulePatch>;
