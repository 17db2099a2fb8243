import { newId, newSecret } from '../../../shared/ids.ts';
import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { AuditRepository } from '../audit/audit.repository.ts';
import { WEBHOOK_TOKEN_PREFIX } from '../auth/authenticator.ts';
import { hashSecret } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { notFound, Unprocessable } from '../errors.ts';
import { requireModel } from '../devices/models.ts';
import type { UserPrincipal } from '../http/context.ts';
import type { SitesRepository } from '../sites/sites.repository.ts';
import type { Db } from '../storage/database.ts';
import type { IntegrationKind, IntegrationRow, IntegrationsRepository } from './integrations.repository.ts';

export const INTEGRATION_KINDS = [
  'chirpstack',
  'ttn',
  'shelly',
] as const satisfies readonly IntegrationKind[];

/** The model of a device an integration creates when the request names none. */
export const DEFAULT_MODEL: Record<IntegrationKind, string> = {
  chirpstack: 'lorawan-generic',
  ttn: 'lorawan-generic',
  shelly: 'shelly-ht-gen1',
};

/**
 * The model an integration's devices get, checked: 422 `unknown_model`, or 422
 * `model_not_for_integration` unless it is a LoRaWAN model for a network server or a Shelly for
 * Shelly URL actions.
 */
function requireModelFor(kind: IntegrationKind, model: string): void {
  const found = requireModel(model);
  const fits = kind === 'shelly' ? found.vendor === 'Shelly' : found.ingest_url_kind === 'lorawan';
  if (!fits) {
    throw new Unprocessable(
      'model_not_for_integration',
      `model ${model} is not a ${kind === 'shelly' ? 'Shelly' : 'LoRaWAN'} model`,
    );
  }
}

/** The model of the devices an integration creates. */
export function modelOfIntegration(row: Pick<IntegrationRow, 'kind' | 'default_model'>): string {
  return row.default_model ?? DEFAULT_MODEL[row.kind];
}

/** Where each kind of integration delivers: the path to paste into the network server. */
const PATHS: Record<IntegrationKind, string> = {
  chirpstack: '/v1/webhooks/chirpstack',
  ttn: '/v1/webhooks/ttn',
  shelly: '/v1/ingest/shelly',
};

/**
 * Inbound integrations (docs/api/integrations.md): a `whk_` token for one site of an account, with
 * which a LoRaWAN network server (ChirpStack, The Things Stack) or Shelly URL actions deliver for
 * any device of that site. The token is shown once, stored hashed, and rotated or revoked at once.
 */
export class IntegrationsService {
  constructor(
    private readonly deps: {
      db: Db;
      clock: Clock;
      config: Pick<Config, 'baseUrl'>;
      integrations: IntegrationsRepository;
      sites: SitesRepository;
      audit: AuditRepository;
      /** Called after a token stopped working (delete, rotation): caches of it must forget it. */
      tokenRevoked: (integrationId: string) => void;
    },
  ) {}

  /** The address to paste into the network server; for Shelly the token travels in it. */
  url(kind: IntegrationKind, token?: string): string {
    const base = `${this.deps.config.baseUrl.replace(/\/+$/, '')}${PATHS[kind]}`;
    return kind === 'shelly' ? `${base}?token=${token ?? '<token>'}` : base;
  }

  view(row: IntegrationRow) {
    return {
      id: row.id,
      kind: row.kind,
      site_id: row.site_id,
      name: row.name,
      model: modelOfIntegration(row),
      url: this.url(row.kind),
      created_at: formatSeconds(row.created_at),
      token_issued_at: formatSeconds(row.token_issued_at),
      last_used_at: formatSecondsOrNull(row.last_used_at),
    };
  }

  /** The answer of create and rotate-token: the view with the token, once. */
  withToken(row: IntegrationRow, token: string) {
    return { ...this.view(row), token, url: this.url(row.kind, token) };
  }

  async create(
    by: UserPrincipal,
    input: { kind: IntegrationKind; site_id: string; name: string; model?: string | undefined },
  ): Promise<{ row: IntegrationRow; token: string }> {
    const { db, clock, integrations, sites, audit } = this.deps;
    const token = newSecret(WEBHOOK_TOKEN_PREFIX);
    const now = clock.nowMicros();
    const row: IntegrationRow = {
      id: newId('int'),
      account_id: by.accountId,
      site_id: input.site_id,
      kind: input.kind,
      name: input.name,
      default_model: input.model ?? null,
      token_hash: hashSecret(token),
      created_by: by.userId,
      created_at: now,
      token_issued_at: now,
      last_used_at: null,
      deleted_at: null,
    };
    await db.transaction().execute(async (trx) => {
      if (!(await sites.hold(trx, by.accountId, input.site_id))) throw notFound('site');
      if (input.model !== undefined) requireModelFor(input.kind, input.model);
      await integrations.insert(trx, row);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'integration.created',
        by: by.userId,
        target: row.id,
        details: { kind: row.kind, site_id: row.site_id, name: row.name, model: modelOfIntegration(row) },
        ts: now,
      });
    });
    return { row, token };
  }

  async get(accountId: string, id: string): Promise<IntegrationRow> {
    const row = await this.deps.integrations.find(this.deps.db, accountId, id);
    if (!row) throw notFound('integration');
    return row;
  }

  /** Deletes the integration: its token is refused from the next request on. */
  async delete(by: UserPrincipal, id: string): Promise<void> {
    const { db, clock, integrations, audit } = this.deps;
    const now = clock.nowMicros();
    await db.transaction().execute(async (trx) => {
      const row = await integrations.find(trx, by.accountId, id);
      if (!row) throw notFound('integration');
      await integrations.softDelete(trx, id, now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'integration.deleted',
        by: by.userId,
        target: id,
        details: { kind: row.kind, site_id: row.site_id, name: row.name },
        ts: now,
      });
    });
    this.deps.tokenRevoked(id);
  }

  /** A new token; the old one is refused from the next request on. */
  async rotateToken(by: UserPrincipal, id: string): Promise<{ row: IntegrationRow; token: string }> {
    const { db, clock, integrations, audit } = this.deps;
    const token = newSecret(WEBHOOK_TOKEN_PREFIX);
    const now = clock.nowMicros();
    const row = await db.transaction().execute(async (trx) => {
      const found = await integrations.find(trx, by.accountId, id);
      if (!found) throw notFound('integration');
      await integrations.setToken(trx, id, hashSecret(token), now);
      await audit.record(trx, {
        accountId: by.accountId,
        kind: 'integration.token_rotated',
        by: by.userId,
        target: id,
        details: { kind: found.kind, site_id: found.site_id },
        ts: now,
      });
      return { ...found, token_hash: hashSecret(token), token_issued_at: now };
    });
    this.deps.tokenRevoked(id);
    return { row, token };
  }
}
