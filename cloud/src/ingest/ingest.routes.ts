import type { Request, Response } from 'express';
import {
  IngestBodySchema,
  IngestValidationError,
  ingestDeviceRef,
  validateIngestBody,
} from '../../../shared/ingest.ts';
import { parseShellyQuery, ShellyQuerySchema } from '../../../shared/shelly.ts';
import { hashSecret } from '../auth/secrets.ts';
import { Authenticator, USER_TOKEN_PREFIX } from '../auth/authenticator.ts';
import { InvalidRequest, type ApiError } from '../errors.ts';
import type { Reply, RouteDef } from '../http/route-table.ts';
import type { Services } from '../services.ts';
import { toApiError } from './ingest.core.ts';
import type { IngestItem } from './ingest.types.ts';

/** Validation as a deferred error: it is reported only after authentication and the rate limit. */
function capture<T>(work: () => T): { value: T | null; error: ApiError | null } {
  try {
    return { value: work(), error: null };
  } catch (err) {
    if (err instanceof IngestValidationError) return { value: null, error: toApiError(err) };
    if (err instanceof InvalidRequest) return { value: null, error: err };
    throw err;
  }
}

/**
 * The credentials of an ingest request: the pipeline's device (Idempotency-Key path) or the raw
 * token, checked in the unit of work. A user token is told apart here (403 `forbidden`, not 401).
 */
async function credentialOf(
  req: Request,
  authenticator: Authenticator,
  queryToken: boolean,
): Promise<Pick<IngestItem, 'credential' | 'countRate'>> {
  const principal = req.ctx.principal;
  if (principal?.kind === 'device') return { credential: { kind: 'device', principal }, countRate: false };
  const token = Authenticator.deviceToken(req.headers.authorization, req.query.token, queryToken);
  if (token?.startsWith(USER_TOKEN_PREFIX)) await authenticator.device(token); // throws 403 or 401
  return { credential: { kind: 'token', tokenHash: token ? hashSecret(token) : null }, countRate: true };
}

/** Protocol adapters for HTTP ingest: they translate into an IngestItem and answer the outcome. */
export function ingestRoutes(s: Services): RouteDef[] {
  const { ingest, clock } = s;

  async function answer(item: IngestItem, req: Request, res: Response): Promise<Reply> {
    const outcome = await ingest.submit(item);
    if (outcome.rate) {
      res.set({
        'X-RateLimit-Device': String(outcome.rate.limit),
        'X-RateLimit-Remaining': String(outcome.rate.remaining),
        'X-RateLimit-Reset': String(outcome.rate.resetAt),
      });
    }
    if (!outcome.ok) throw outcome.error;
    req.ctx.principal ??= {
      kind: 'device',
      accountId: outcome.accountId,
      deviceId: outcome.deviceId,
      siteId: '',
      localId: '',
      model: '',
    };
    return {
      status: 200,
      body: { accepted: outcome.accepted, deduplicated: outcome.deduplicated, channels: outcome.channels },
    };
  }

  return [
    {
      method: 'post',
      path: '/v1/ingest',
      auth: 'device',
      inlineAuth: true,
      summary: 'Submit 1 to 32 measurements of one device (device token)',
      requestBody: IngestBodySchema,
      success: {
        status: 200,
        description: '{accepted, deduplicated, channels: [{type, label, channel_id}]}',
      },
      errors: [
        'bad_json',
        'invalid_request',
        'invalid_measurement',
        'no_measurements',
        'device_not_in_token',
        'unknown_kind',
        'out_of_range',
        'idempotency_conflict',
      ],
      handler: async (req, res) => {
        const receivedAt = clock.nowMicros();
        // On the Idempotency-Key path the pipeline has parsed the body already.
        const parsed =
          req.ctx.principal !== null
            ? { value: req.body as unknown, error: null }
            : capture(() => {
                const raw = req.ctx.rawBody;
                if (!raw || raw.length === 0)
                  throw new InvalidRequest('bad_json', 'the body is empty; send JSON');
                try {
                  return JSON.parse(raw.toString('utf8')) as unknown;
                } catch {
                  throw new InvalidRequest('bad_json', 'the body is not valid JSON');
                }
              });
        const override = req.get('X-Device-Id');
        const ref = parsed.error
          ? { value: null, error: null }
          : capture(() => ingestDeviceRef(parsed.value, override));
        const body =
          (parsed.error ?? ref.error)
            ? { value: null, error: parsed.error ?? ref.error }
            : capture(() =>
                validateIngestBody(parsed.value, { nowMicros: receivedAt, deviceOverride: override }),
              );
        return answer(
          {
            ...(await credentialOf(req, s.authenticator, false)),
            deviceRef: ref.value ?? null,
            receivedAt,
            ts: body.value?.ts ?? null,
            measurements: body.value?.measurements ?? [],
            error: body.error,
          },
          req,
          res,
        );
      },
    },
    {
      method: 'get',
      path: '/v1/ingest/shelly',
      auth: 'device',
      inlineAuth: true,
      queryToken: true,
      summary: 'Shelly URL-action ingest: values in the query string (token in the query allowed)',
      query: ShellyQuerySchema,
      success: { status: 200, description: '{accepted, deduplicated, channels}, as POST /v1/ingest' },
      errors: ['invalid_request', 'no_measurements', 'device_not_in_token', 'out_of_range'],
      handler: async (req, res) => {
        const receivedAt = clock.nowMicros();
        const query = req.query as Record<string, unknown>;
        const device = typeof query.device === 'string' && query.device !== '' ? query.device : null;
        const reading = capture(() => {
          if (device === null) {
            throw new InvalidRequest('invalid_request', 'device is required', [
              { path: 'device', message: 'required' },
            ]);
          }
          return parseShellyQuery(query, receivedAt);
        });
        return answer(
          {
            ...(await credentialOf(req, s.authenticator, true)),
            deviceRef: device,
            receivedAt,
            ts: reading.value?.ts ?? null,
            measurements: reading.value?.measurements ?? [],
            shellyBattery: reading.value?.battery ?? null,
            lwt: reading.value?.lwt ?? null,
            error: reading.error,
          },
          req,
          res,
        );
      },
    },
  ];
}
