import { formatSeconds } from '../../../shared/time.ts';
import type { Tables } from '../storage/schema.ts';

/** A site as the API shows it: RFC 3339 UTC times to the second. */
export function siteView(s: Tables['sites']) {
  return {
    id: s.id,
    name: s.name,
    vertical: s.vertical,
    timezone: s.timezone,
    created_at: formatSeconds(s.created_at),
  };
}
