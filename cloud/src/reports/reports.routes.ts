import { z } from 'zod';
import { notFound } from '../errors.ts';
import { param, userOf } from '../http/context.ts';
import { timestamp } from '../http/inputs.ts';
import { pageQuerySchema, pageRequest, toPage, byCreation } from '../http/pagination.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput, siteOfBodyFirst } from '../http/validate.ts';
import { reportView, type ReportsService } from './reports.service.ts';

/**
 * Template and language are plain strings here: an unknown one is 422 `unknown_template` /
 * `unknown_language` (the service checks them), not a 400.
 */
const CreateReport = z.strictObject({
  site_id: z.string().min(1),
  template: z.string(),
  language: z.string(),
  period: z.strictObject({ from: timestamp, to: timestamp }),
});
const ListReports = z.object({ ...pageQuerySchema, site_id: z.string().optional() });

/** The services the report routes use. */
export interface ReportRoutesDeps {
  reports: ReportsService;
}

export function reportRoutes(s: ReportRoutesDeps): RouteDef[] {
  const { reports } = s;
  return [
    {
      method: 'post',
      path: '/v1/reports',
      auth: 'user',
      family: 'report',
      summary: 'Request a PDF report of a site for a period; made in the background (poll its state)',
      requestBody: CreateReport,
      success: { status: 202, description: 'the report object, state queued' },
      errors: ['site_not_found', 'invalid_request', 'unknown_template', 'unknown_language', 'invalid_period'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        await siteOfBodyFirst(req.body, async (siteId) =>
          Boolean(await reports.siteExists(user.accountId, siteId)),
        );
        const body = parseInput(CreateReport, req.body, 'body');
        return { status: 202, body: reportView(await reports.create(user, body)) };
      },
    },
    {
      method: 'get',
      path: '/v1/reports',
      auth: 'user',
      summary: 'Reports of the account (or of one site), newest first',
      query: ListReports,
      success: { status: 200, description: 'list envelope of report objects' },
      errors: ['site_not_found', 'invalid_request'],
      handler: async (req) => {
        const user = userOf(req.ctx);
        const q = parseInput(ListReports, req.query, 'query');
        if (q.site_id !== undefined && !(await reports.siteExists(user.accountId, q.site_id))) {
          throw notFound('site');
        }
        const rows = await reports.list(user.accountId, q.site_id, pageRequest(q));
        return { status: 200, body: toPage(rows, q.limit, byCreation, reportView) };
      },
    },
    {
      method: 'get',
      path: '/v1/reports/:report_id',
      auth: 'user',
      summary: 'A report: its state, and size and SHA-256 once ready',
      success: { status: 200, description: 'the report object' },
      errors: ['report_not_found'],
      handler: async (req) => ({
        status: 200,
        body: reportView(await reports.get(userOf(req.ctx).accountId, param(req, 'report_id'))),
      }),
    },
    {
      method: 'get',
      path: '/v1/reports/:report_id/file',
      auth: 'user',
      summary: 'The PDF of a ready report (application/pdf, as an attachment)',
      success: { status: 200, description: 'application/pdf' },
      errors: ['report_not_found', 'report_not_ready'],
      handler: async (req, res) => {
        const { report, content, fileName } = await reports.file(
          userOf(req.ctx).accountId,
          param(req, 'report_id'),
        );
        const etag = `"${report.sha256}"`;
        res.set({
          'Content-Type': 'application/pdf',
          'Content-Disposition': `attachment; filename="${fileName}"`,
          ETag: etag,
          'Cache-Control': 'private, max-age=0, must-revalidate',
        });
        if (req.get('If-None-Match') === etag) {
          res.status(304).end();
          return undefined;
        }
        res.status(200).end(content);
        return undefined;
      },
    },
  ];
}
