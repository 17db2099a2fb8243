import { userOf } from '../http/context.ts';
import { DASHBOARD_API_PREFIX, type RouteDef } from '../http/route-table.ts';
import type { LiveStreams } from './live.stream.ts';

/** What these routes use; the composition root passes them in. */
export interface LiveRoutesDeps {
  liveStreams: LiveStreams;
}

/** The dashboard's live updates: one Server-Sent Events stream per tab (docs/api/dashboard.md). */
export function liveRoutes(s: LiveRoutesDeps): RouteDef[] {
  const { liveStreams } = s;
  return [
    {
      method: 'get',
      path: `${DASHBOARD_API_PREFIX}/stream`,
      auth: 'session',
      dashboard: true,
      family: null,
      summary: "Server-Sent Events: the account's sensor, alarm and device changes as they happen",
      success: { status: 200, description: 'text/event-stream, open until the session ends' },
      errors: ['rate_limited', 'overloaded'],
      handler: async (req, res) => {
        const principal = userOf(req.ctx);
        if (principal.kind !== 'session') throw new Error('the stream route takes a session only');
        await liveStreams.open(principal, req, res);
        return undefined;
      },
    },
  ];
}
