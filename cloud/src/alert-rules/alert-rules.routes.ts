import { z } from 'zod';
import { param, userOf } from '../http/context.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import { AlertRuleBody, AlertRulePatch } from './alert-rules.body.ts';
import { alertRuleView, inputOf, type AlertRulesService } from './alert-rules.service.ts';

const ListRules = z.object({ ...pageQuerySchema });

export interface AlertRuleRoutesDeps {
  alertRules: AlertRulesService;
}

const REFERENCES = [
  'site_not_found',
  'channel_not_found',
  'user_not_found',
  'webhook_not_found',
  'unknown_kind',
  'invalid_range',
  'invalid_webhook_url',
];

export function alertRuleRoutes(s: AlertRuleRoutesDeps): RouteDef[] {
  const { alertRules } = s;
  return [
    {
      method: 'post',
      path: '/v1/alert-rules',
      auth: 'user',
      summary:
        'Create an alert rule: conditions with severities, delays and hysteresis, an active schedule, an escalation chain',
      requestBody: AlertRuleBody,
      success: { status: 201, description: 'the alert rule object' },
      errors: ['invalid_request', ...REFERENCES],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, (siteId) => alertRules.siteExists(user.accountId, siteId));
        const body = parseInput(AlertRuleBody, req.body, 'body');
        return { status: 201, body: alertRuleView(await alertRules.create(user, body)) };
      },
    },
    {
      method: 'get',
      path: '/v1/alert-rules',
      auth: 'user',
      summary: 'Alert rules of the account, oldest first',
      query: ListRules,
      success: { status: 200, description: 'list envelope of alert rule objects' },
      errors: ['invalid_request'],
      handler: async (req) => {
        const q = parseInput(ListRules, req.query, 'query');
        const rows = await alertRules.list(userOf(req.ctx).accountId, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, byCreation, alertRuleView) };
      },
    },
    {
      method: 'get',
      path: '/v1/alert-rules/:rule_id',
      auth: 'user',
      summary: 'An alert rule',
      success: { status: 200, description: 'the alert rule object' },
      errors: ['alert_rule_not_found'],
      handler: async (req) => ({
        status: 200,
        body: alertRuleView(await alertRules.get(userOf(req.ctx).accountId, param(req, 'rule_id'))),
      }),
    },
    {
      method: 'patch',
      path: '/v1/alert-rules/:rule_id',
      auth: 'user',
      summary:
        'Change an alert rule; it applies to measurements from now on (audit-logged with before and after)',
      requestBody: AlertRulePatch,
      success: { status: 200, description: 'the alert rule object' },
      errors: ['alert_rule_not_found', 'invalid_request', ...REFERENCES],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const rule = await alertRules.get(user.accountId, param(req, 'rule_id')); // 404 before 400
        // its own site is not looked up again (it may have been deleted since)
        await siteOfBodyFirst(
          req.body,
          async (siteId) => siteId === rule.site_id || alertRules.siteExists(user.accountId, siteId),
        );
        const patch = parseInput(AlertRulePatch, req.body, 'body');
        const updated = await alertRules.update(user, param(req, 'rule_id'), (current) => {
          const base = inputOf(current);
          const scope =
            patch.channel_ids !== undefined
              ? { channel_ids: patch.channel_ids, site_id: null, kind: null }
              : patch.site_id !== undefined || patch.kind !== undefined
                ? {
                    channel_ids: null,
                    site_id: patch.site_id ?? base.site_id,
                    kind: patch.kind ?? base.kind,
                  }
                : {};
          const { channel_ids: _c, site_id: _s, kind: _k, ...rest } = patch;
          return parseInput(AlertRuleBody, { ...base, ...rest, ...scope }, 'body');
        });
        return { status: 200, body: alertRuleView(updated) };
      },
    },
    {
      method: 'delete',
      path: '/v1/alert-rules/:rule_id',
      auth: 'user',
      summary: 'Delete an alert rule: its open alarms end now; its events stay',
      success: { status: 204, description: 'deleted' },
      errors: ['alert_rule_not_found'],
      handler: async (req) => {
        await alertRules.delete(userOf(req.ctx), param(req, 'rule_id'));
        return { status: 204 };
      },
    },
  ];
}
