import { redactUrl, type Logger } from '../logger.ts';
import type { Principal } from './context.ts';

/** The access log's line for one request (the Express app and the ingest fast path alike). */
export function logRequest(
  log: Logger,
  requestId: string,
  method: string,
  url: string,
  ip: string | undefined,
  status: number,
  started: number,
  principal: Principal | null,
): void {
  log.info(
    {
      req_id: requestId,
      method,
      url: redactUrl(url),
      ip,
      status,
      ms: Math.round((performance.now() - started) * 10) / 10,
      account_id: principal?.accountId,
      device_id: principal?.kind === 'device' ? principal.deviceId : undefined,
    },
    'request',
  );
}
