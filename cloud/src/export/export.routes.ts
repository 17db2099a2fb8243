import { formatSeconds } from '../../../shared/time.ts';
import type { Clock } from '../clock.ts';
import { userOf } from '../http/context.ts';
import type { RouteDef } from '../http/route-table.ts';
import type { ExportService } from './export.service.ts';

/** What these routes use; the composition root passes them in. */
export interface ExportRoutesDeps {
  accountExport: ExportService;
  clock: Clock;
}

export function exportRoutes(s: ExportRoutesDeps): RouteDef[] {
  const { accountExport, clock } = s;
  return [
    {
      method: 'post',
      path: '/v1/accounts/me/export',
      auth: 'user',
      // Decisions, "Tokens": the account export needs the admin scope.
      scope: 'admin',
      summary:
        'Everything of the account as one streamed ZIP: measurements.csv, events.csv, audit.csv, meta.json',
      success: { status: 200, description: 'application/zip, streamed' },
      errors: [],
      handler: async (req, res) => {
        const user = userOf(req.ctx);
        const day = formatSeconds(clock.nowMicros()).slice(0, 10);
        res.status(200).set({
          'Content-Type': 'application/zip',
          'Content-Disposition': `attachment; filename="export-${user.accountId}-${day}.zip"`,
        });
        try {
          await accountExport.write(user.accountId, res);
        } catch (err) {
          // The status is sent: cutting the connection is the only way left to say the ZIP is incomplete.
          req.ctx.log.error({ err }, 'account export failed');
          res.destroy();
        }
        return undefined;
      },
    },
  ];
}
