import { formatSeconds, formatSecondsOrNull } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';
import { modelOf } from './models.ts';

/** A device as the API shows it: RFC 3339 UTC times to the second, `online` as a boolean. */
export function deviceView(d: Tables['devices']) {
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
  };
}
