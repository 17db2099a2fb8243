import {
  hasNul,
  IngestValidationError,
  ingestDeviceRef,
  refuseNulText,
  validateIngestBody,
} from '../../../shared/ingest.ts';
import { parseShellyQuery } from '../../../shared/shelly.ts';
import { USER_TOKEN_PREFIX, WEBHOOK_TOKEN_PREFIX, type Authenticator } from '../auth/authenticator.ts';
import { hashSecret } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import { InvalidRequest, Overloaded, type ApiError } from '../errors.ts';
import type { DevicePrincipal, Principal } from '../http/context.ts';
import { deviceToken } from '../http/credentials.ts';
import { parseJson, type Reply } from '../http/route-table.ts';
import { toApiError } from './ingest.core.ts';
import type { Ingest, IngestItem } from './ingest.types.ts';

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
 * One ingest request as both ways of serving it see it: the Express route (and its Idempotency-Key
 * pipeline) and the fast path in front of Express (`ingest.fast-path.ts`).
 */
export interface IngestExchange {
  /** The body exactly as received (POST). */
  rawBody: Buffer | null;
  /** The query string's values (Shelly GET). */
  query: Record<string, unknown>;
  /** A request header by its lower-case name. */
  header(name: string): string | undefined;
  /** Set by the pipeline when it authenticated already (Idempotency-Key path); set here on success, for the access log. */
  principal: Principal | null;
  setHeaders(headers: Record<string, string>): void;
  /** The request's logger (its lines carry the request id). */
  readonly log: DeliveryLog;
}

/** What a handler logs through: the request's logger. */
export interface DeliveryLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * The credentials of an ingest request: the pipeline's device (Idempotency-Key path) or the raw
 * token, checked in the unit of work. A user token is told apart here (403 `forbidden`, not 401).
 */
async function credentialOf(
  x: IngestExchange,
  authenticator: IngestHandlerDeps['authenticator'],
  queryToken: boolean,
): Promise<Pick<IngestItem, 'credential' | 'countRate'>> {
  const principal = x.principal;
  if (principal?.kind === 'device') return { credential: { kind: 'device', principal }, countRate: false };
  const token = deviceToken(x.header('authorization'), x.query.token, queryToken);
  if (token?.startsWith(USER_TOKEN_PREFIX)) await authenticator.device(token); // throws 403 or 401
  return { credential: { kind: 'token', tokenHash: token ? hashSecret(token) : null }, countRate: true };
}

/** What the ingest handlers use. */
export interface IngestHandlerDeps {
  ingest: Ingest;
  clock: Clock;
  /** Tells a user token apart (403) before the unit of work checks the device token. */
  authenticator: Pick<Authenticator, 'device'>;
  /** Inbound integrations: the Shelly GET's `whk_` tokens and the LoRaWAN webhooks. */
  integrationWebhooks?: IntegrationWays;
}

/**
 * The ways in of inbound integrations (cloud/src/integrations/), which the ingest routes and the fast
 * path hand requests to: the Shelly GET with an integration's `whk_` token (any device of its site,
 * created on first use; 401/403 for the token, then 400 for a device id or model it cannot use), and
 * the LoRaWAN webhooks.
 */
export interface IntegrationWays {
  shellyDevice(token: string, localId: string | null, model: string | undefined): Promise<DevicePrincipal>;
  /** `POST /v1/webhooks/chirpstack?event=…`, served on the fast path too. */
  chirpstack(
    token: string | null,
    event: unknown,
    contentType: string | undefined,
    body: Buffer | null,
    log: DeliveryLog,
  ): Promise<Reply>;
  /** `POST /v1/webhooks/ttn`, served on the fast path too. */
  ttn(token: string | null, body: Buffer | null, log: DeliveryLog): Promise<Reply>;
}

/** The ingest requests' handlers, free of any HTTP framework. */
export function ingestHandlers(s: IngestHandlerDeps) {
  const { ingest, clock } = s;

  async function answer(item: IngestItem, x: IngestExchange): Promise<Reply> {
    const outcome = await ingest.submit(item);
    if (outcome.rate) {
      x.setHeaders({
        'X-RateLimit-Device': String(outcome.rate.limit),
        'X-RateLimit-Remaining': String(outcome.rate.remaining),
        'X-RateLimit-Reset': String(outcome.rate.resetAt),
      });
    }
    if (!outcome.ok) throw outcome.error;
    x.principal ??= {
      kind: 'device',
      accountId: outcome.accountId,
      deviceId: outcome.deviceId,
      siteId: '',
      localId: '',
      model: '',
    };
    const { accepted, deduplicated, channels, channelsJson } = outcome;
    return {
      status: 200,
      body: { accepted, deduplicated, channels },
      json: `{"accepted":${accepted},"deduplicated":${deduplicated},"channels":${channelsJson}}`,
    };
  }

  /**
   * The Shelly GET with an integration token: the device is any of the integration's site, named by
   * `device` or, as Shelly Gen1 URL actions append it, `id`; created on first use.
   */
  async function shellyIntegration(
    x: IngestExchange,
    token: string,
    integrations: IntegrationWays,
    receivedAt: number,
  ): Promise<Reply> {
    const query = x.query;
    const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
    const named = text(query.device) ?? text(query.id);
    const principal = await integrations.shellyDevice(token, named, text(query.model) ?? undefined);
    const reading = capture(() => parseShellyQuery(query, receivedAt));
    return answer(
      {
        credential: { kind: 'device', principal },
        countRate: true,
        deviceRef: null,
        receivedAt,
        ts: reading.value?.ts ?? null,
        measurements: reading.value?.measurements ?? [],
        shellyBattery: reading.value?.battery ?? null,
        lwt: reading.value?.lwt ?? null,
        error: reading.error,
        way: 'shelly',
      },
      x,
    );
  }

  /** Admission control: over capacity, the request is refused before any work (its sender retries). */
  function admit(way: 'http' | 'shelly'): void {
    if (!ingest.overloaded()) return;
    ingest.shed({ way, measurements: [] });
    throw Overloaded.instance;
  }

  return {
    /** `POST /v1/ingest`. `parsedBody`: the body the pipeline parsed already (Idempotency-Key path). */
    async post(x: IngestExchange, parsedBody?: unknown): Promise<Reply> {
      admit('http');
      const receivedAt = clock.nowMicros();
      const parsed =
        parsedBody !== undefined
          ? { value: parsedBody, error: null }
          : capture(() => {
              if (!x.rawBody || x.rawBody.length === 0)
                throw new InvalidRequest('bad_json', 'the body is empty; send JSON');
              return parseJson(x.rawBody);
            });
      const override = x.header('x-device-id');
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
          ...(await credentialOf(x, s.authenticator, false)),
          deviceRef: ref.value ?? null,
          receivedAt,
          ts: body.value?.ts ?? null,
          measurements: body.value?.measurements ?? [],
          error: body.error,
        },
        x,
      );
    },

    /** `GET /v1/ingest/shelly`. */
    async shelly(x: IngestExchange): Promise<Reply> {
      admit('shelly');
      const receivedAt = clock.nowMicros();
      const query = x.query;
      const token = deviceToken(x.header('authorization'), query.token, true);
      if (token?.startsWith(WEBHOOK_TOKEN_PREFIX) && s.integrationWebhooks) {
        return shellyIntegration(x, token, s.integrationWebhooks, receivedAt);
      }
      const named = typeof query.device === 'string' && query.device !== '' ? query.device : null;
      const reading = capture(() => {
        if (named === null) {
          throw new InvalidRequest('invalid_request', 'device is required', [
            { path: 'device', message: 'required' },
          ]);
        }
        refuseNulText(named, 'device');
        return parseShellyQuery(query, receivedAt);
      });
      const device = named !== null && hasNul(named) ? null : named;
      return answer(
        {
          ...(await credentialOf(x, s.authenticator, true)),
          deviceRef: device,
          receivedAt,
          ts: reading.value?.ts ?? null,
          measurements: reading.value?.measurements ?? [],
          shellyBattery: reading.value?.battery ?? null,
          lwt: reading.value?.lwt ?? null,
          error: reading.error,
          way: 'shelly',
        },
        x,
      );
    },
  };
}
