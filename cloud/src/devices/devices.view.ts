import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';
import { publicSettingsView } from '../public/public.view.ts';
import type { PublicDeviceRow } from '../public/public.repository.ts';
import { modelOf } from './models.ts';

/**
 * A device as the API shows it: RFC 3339 UTC times to the second, `online` as a boolean, and what
 * its owner publishes about it in the public API (`public`, null when never set).
 */
export function deviceView(d: Tables['devices'], published: PublicDeviceRow | null | undefined = null) {
  return {
    id: d.id,
    site_id: d.site_id,
    local_id: d.local_id,
    name: d.name,
    notes: d.notes,
    model: d.model,
    fw_version: d.fw_version,
    ingest_url_kind: modelOf(d.model).ingest_url_kind,
    last_seen_at: formatSecondsOrNull(d.last_seen_at),
    online: d.online === 1,
    created_at: formatSeconds(d.created_at),
    public: publicSettingsView(published),
  };
}
