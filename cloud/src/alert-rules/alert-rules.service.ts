import { newId } from '../../../shared/ids.ts';
import { isMeasurementKind, MEASUREMENT_KINDS } from '../../../shared/kinds.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import { notFound, Unprocessable } from '../errors.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import { checkWebhookHost, parseWebhookUrl } from '../webhooks/url-guard.ts';
import type { PageRequest } from '../storage/keyset.ts';
import type { Condition } from './alert-evaluator.ts';
import type { Schedule } from './alert-schedule.ts';
import type { AlertRuleInput, NotifyInput } from './alert-rules.body.ts';
import type { AlertRuleRow, AlertRulesRepository } from './alert-rules.repository.ts';
import { maskedNotify, withStoredChatUrls } from './chat-urls.ts';

/** The alert rule object (docs/api/alert-rules.md). */
export function alertRuleView(r: AlertRuleRow) {
  return {
    id: r.id,
    name: r.name,
    enabled: r.enabled === 1,
    channel_ids: r.channel_ids === null ? null : (JSON.parse(r.channel_ids) as string[]),
    site_id: r.site_id,
    kind: r.kind,
    conditions: JSON.parse(r.conditions) as Condition[],
    schedule: r.schedule === null ? null : (JSON.parse(r.schedule) as Schedule),
    // Chat URLs are credentials: shown masked to every caller, and in the audit trail.
    notify: maskedNotify(JSON.parse(r.notify) as NotifyInput),
    created_at: formatSeconds(r.created_at),
    updated_at: formatSeconds(r.updated_at),
  };
}

/** What the rule service tells the engine, inside the change's transaction and after commit. */
export interface AlertRuleListener {
  ruleChanged(db: Db, rule: AlertRuleRow, now: number): Promise<void>;
  ruleCommitted(): void;
}

/** The fields of a row that decide what the evaluator judges (a change of these is a new version). */
const JUDGED = ['enabled', 'site_id', 'kind', 'channel_ids', 'conditions', 'schedule'] as const;

/**
 * Alert rules as people manage them (docs/api/alert-rules.md). Every change records the version in
 * force from now (so later data is judged by it and earlier data by the one before), ensures a
 * tracker for every channel the rule now covers, and is audit-logged with before and after.
 */
export class AlertRulesService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      repository: AlertRulesRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      listener: AlertRuleListener;
      /** WEBHOOK_ALLOW_PRIVATE: chat URLs may reach private addresses. */
      allowPrivateTargets: boolean;
    },
  ) {}

  async get(accountId: string, id: string): Promise<AlertRuleRow> {
    const rule = await this.deps.repository.find(this.deps.db, accountId, id);
    if (!rule) throw notFound('alert_rule');
    return rule;
  }

  /** Whether the site is the account's (a create body's `site_id` is checked before the body). */
  async siteExists(accountId: string, siteId: string): Promise<boolean> {
    return (await this.deps.sites.find(this.deps.db, accountId, siteId)) !== undefined;
  }

  list(accountId: string, page: PageRequest): Promise<AlertRuleRow[]> {
    return this.deps.repository.list(this.deps.db, accountId, page);
  }

  async create(by: UserPrincipal, given: AlertRuleInput): Promise<AlertRuleRow> {
    const { db, clock, repository, audit, listener } = this.deps;
    const now = clock.nowMicros();
    const input = { ...given, notify: withStoredChatUrls(given.notify, null) };
    await this.checkChatUrls(input.notify, []);
    const row = await db.transaction().execute(async (trx) => {
      await this.check(trx, by.accountId, input);
      const rule: AlertRuleRow = {
        id: newId('alr'),
        account_id: by.accountId,
        created_by: by.userId,
        created_at: now,
        updated_at: now,
        deleted_at: null,
        ...columns(input),
      };
      await repository.insert(trx, rule);
      await this.versionAndTrack(trx, rule, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'alert_rule.created',
        by: by.userId,
        target: rule.id,
        details: { after: alertRuleView(rule) },
        ts: now,
      });
      return rule;
    });
    listener.ruleCommitted();
    return row;
  }

  /** `merge` answers the whole new body from the rule as it is (the route validates it). */
  async update(
    by: UserPrincipal,
    id: string,
    mergeGiven: (current: AlertRuleRow) => AlertRuleInput,
  ): Promise<AlertRuleRow> {
    const { db, clock, repository, audit, listener } = this.deps;
    const now = clock.nowMicros();
    // A chat URL sent back masked, as the rule was read, keeps the URL the rule has.
    const merge = (current: AlertRuleRow): AlertRuleInput => {
      const input = mergeGiven(current);
      return { ...input, notify: withStoredChatUrls(input.notify, inputOf(current).notify) };
    };
    // chat URLs are resolved before the transaction (a DNS lookup holds nothing)
    const current = await repository.find(db, by.accountId, id);
    if (!current) throw notFound('alert_rule');
    await this.checkChatUrls(merge(current).notify, chatUrlsOf(inputOf(current).notify));
    const row = await db.transaction().execute(async (trx) => {
      const before = await repository.find(trx, by.accountId, id);
      if (!before) throw notFound('alert_rule');
      const input = merge(before);
      await this.check(trx, by.accountId, input, inputOf(before));
      const after: AlertRuleRow = { ...before, ...columns(input), updated_at: now };
      await repository.update(trx, id, { ...columns(input), updated_at: now });
      if (JUDGED.some((k) => before[k] !== after[k])) await this.versionAndTrack(trx, after, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'alert_rule.changed',
        by: by.userId,
        target: id,
        details: { before: alertRuleView(before), after: alertRuleView(after) },
        ts: now,
      });
      return after;
    });
    listener.ruleCommitted();
    return row;
  }

  /** Deletes the rule: its open alarms end now, its events stay (naming it by id). */
  async delete(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, repository, audit, listener } = this.deps;
    const now = clock.nowMicros();
    await db.transaction().execute(async (trx) => {
      const before = await repository.find(trx, by.accountId, id);
      if (!before) throw notFound('alert_rule');
      const deleted = { ...before, enabled: 0, deleted_at: now, updated_at: now };
      await repository.update(trx, id, { deleted_at: now, updated_at: now });
      await repository.recordVersion(trx, versionOf(deleted, now));
      await repository.markRuleDue(trx, id, now);
      await listener.ruleChanged(trx, deleted, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'alert_rule.deleted',
        by: by.userId,
        target: id,
        details: { before: alertRuleView(before) },
        ts: now,
      });
    });
    listener.ruleCommitted();
  }

  private async versionAndTrack(db: Db, rule: AlertRuleRow, now: number): Promise<void> {
    const { repository, listener } = this.deps;
    await repository.recordVersion(db, versionOf(rule, now));
    const channels = await repository.channelsInScope(db, rule.account_id, scopeOf(rule));
    await repository.ensureTrackers(
      db,
      channels.map((c) => ({ ruleId: rule.id, seq: c.seq })),
      now,
    );
    await repository.markRuleDue(db, rule.id, now);
    // measurements already folded with a ts after the change (stamped ahead of the clock) are
    // judged again by the new version: the change marks its channels from now
    await repository.mark(
      db,
      channels.map((c) => ({ seq: c.seq, from: now })),
    );
    await listener.ruleChanged(db, rule, now);
  }

  /**
   * Chat URLs are checked like outbound webhooks when they are registered (and again at each post):
   * 422 `invalid_webhook_url` for a host that does not resolve to public addresses. URLs the rule
   * already had are not looked up again.
   */
  private async checkChatUrls(notify: NotifyInput, known: readonly string[]): Promise<void> {
    const checked = new Set(known);
    for (const [i, step] of notify.steps.entries()) {
      for (const [j, { url }] of step.chat.entries()) {
        if (checked.has(url)) continue;
        checked.add(url);
        try {
          await checkWebhookHost(parseWebhookUrl(url), this.deps.allowPrivateTargets);
        } catch (err) {
          // The dashboard shows the message beside the field the details name.
          if (!(err instanceof Unprocessable)) throw err;
          throw new Unprocessable(err.code, err.message, [
            { path: `notify.steps.${i}.chat.${j}.url`, message: err.message },
          ]);
        }
      }
    }
  }

  /**
   * 404 for a site, channel, user or webhook that is not the account's, then 422 for an unknown
   * kind or a bad range. On a change (`before`), only what the change adds is looked up: a rule
   * whose webhook, user or channel's device was deleted since can still be changed (disabled,
   * renamed); at its notifications a target that is gone is skipped.
   */
  private async check(
    db: Db,
    accountId: string,
    input: AlertRuleInput,
    before?: AlertRuleInput,
  ): Promise<void> {
    const { repository, sites } = this.deps;
    const added = (now: readonly string[], was: readonly string[] = []) => {
      const known = new Set(was);
      return [...new Set(now)].filter((id) => !known.has(id));
    };
    if (
      input.site_id &&
      input.site_id !== before?.site_id &&
      // held: a rule for a site deleted meanwhile is 404, not a rule of a dead site
      !(await sites.hold(db, accountId, input.site_id))
    )
      throw notFound('site');
    const channelIds = added(input.channel_ids ?? [], before?.channel_ids ?? []);
    if (channelIds.length > 0) {
      const found = await repository.channelsInScope(db, accountId, {
        channel_ids: channelIds,
        site_id: null,
        kind: null,
      });
      if (new Set(found.map((c) => c.channel_id)).size !== channelIds.length) throw notFound('channel');
    }
    const stepIds = (i: AlertRuleInput | undefined, key: 'user_ids' | 'webhook_ids') =>
      i?.notify.steps.flatMap((s) => s[key]) ?? [];
    const userIds = added(stepIds(input, 'user_ids'), stepIds(before, 'user_ids'));
    if ((await repository.usersByIds(db, accountId, userIds)).length !== userIds.length)
      throw notFound('user');
    const webhookIds = added(stepIds(input, 'webhook_ids'), stepIds(before, 'webhook_ids'));
    if ((await repository.webhookIds(db, accountId, webhookIds)).length !== webhookIds.length)
      throw notFound('webhook');
    if (input.kind && input.kind !== before?.kind && !isMeasurementKind(input.kind))
      throw new Unprocessable(
        'unknown_kind',
        `kind ${JSON.stringify(input.kind)} is not a supported type (${MEASUREMENT_KINDS.join(', ')})`,
        [{ path: 'kind', message: 'not a supported measurement type' }],
      );
    for (const c of input.conditions)
      if (c.type === 'outside' && c.min >= c.max)
        throw new Unprocessable('invalid_range', 'outside: min must be below max');
  }
}

function chatUrlsOf(notify: NotifyInput): string[] {
  return notify.steps.flatMap((s) => s.chat.map((c) => c.url));
}

function columns(input: AlertRuleInput) {
  return {
    name: input.name,
    enabled: input.enabled ? 1 : 0,
    channel_ids: input.channel_ids ? JSON.stringify(input.channel_ids) : null,
    site_id: input.channel_ids ? null : (input.site_id ?? null),
    kind: input.channel_ids ? null : (input.kind ?? null),
    conditions: JSON.stringify(input.conditions),
    schedule: input.schedule ? JSON.stringify(input.schedule) : null,
    notify: JSON.stringify(input.notify),
  };
}

export function scopeOf(r: { channel_ids: string | null; site_id: string | null; kind: string | null }) {
  return {
    channel_ids: r.channel_ids === null ? null : (JSON.parse(r.channel_ids) as string[]),
    site_id: r.site_id,
    kind: r.kind,
  };
}

function versionOf(r: AlertRuleRow, validFrom: number) {
  return {
    rule_id: r.id,
    valid_from: validFrom,
    enabled: r.enabled,
    site_id: r.site_id,
    kind: r.kind,
    channel_ids: r.channel_ids,
    conditions: r.conditions,
    schedule: r.schedule,
  };
}

/** The rule body of a row, for a PATCH to merge into: as stored, chat URLs whole. */
export function inputOf(r: AlertRuleRow): AlertRuleInput {
  const v = alertRuleView(r);
  return {
    name: v.name,
    enabled: v.enabled,
    channel_ids: v.channel_ids,
    site_id: v.site_id,
    kind: v.kind,
    conditions: v.conditions,
    schedule: v.schedule,
    notify: JSON.parse(r.notify) as NotifyInput,
  };
}
