import { useEffect, useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { all, api, ApiError, seg, type Page } from '../api.ts';
import {
  AckForm,
  alarmTitle,
  EventBadge,
  KIND_LABELS,
  RuleNote,
  sensorWithDevice,
  useUserName,
} from '../components/alarm-bits.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { ErrorBox, Field, Loading, Time } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive } from '../live.ts';
import { sensorName as kindName } from '../site-helpers.ts';
import { deviceName, formatValue, type AlarmEvent, type Device, type Sensor, type Site } from '../types.ts';
import '../sensors.css';

const PAGE_SIZE = 50;

/** The filters as the URL holds them (so a filtered list is a link); no `state` means open alarms. */
interface Filters {
  site_id: string;
  state: 'open' | 'resolved' | 'all';
  kind: string;
}

function filtersOf(query: Record<string, string>): Filters {
  const state = query.state === 'resolved' || query.state === 'all' ? query.state : 'open';
  return { site_id: query.site_id ?? '', state, kind: query.kind ?? '' };
}

function queryOf(f: Filters): string {
  const q = new URLSearchParams();
  if (f.site_id) q.set('site_id', f.site_id);
  if (f.state !== 'open') q.set('state', f.state);
  if (f.kind) q.set('kind', f.kind);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Whether an event belongs in the list under the filters (for events arriving live). */
function matches(e: AlarmEvent, f: Filters): boolean {
  if (e.withdrawn_at) return false;
  if (f.site_id && e.site_id !== f.site_id) return false;
  if (f.kind && e.kind !== f.kind) return false;
  if (f.state !== 'all' && e.state !== f.state) return false;
  return true;
}

/** The list with `e` added (when new), replaced or removed as the filters say, newest first. */
function upserted(list: AlarmEvent[], e: AlarmEvent, isNew: boolean, f: Filters): AlarmEvent[] {
  const rest = list.filter((x) => x.id !== e.id);
  if (!matches(e, f)) return rest;
  const known = rest.length !== list.length;
  if (!known && !isNew) return list;
  return [e, ...rest].sort((a, b) => b.started_at.localeCompare(a.started_at));
}

async function loadPage(f: Filters, cursor: string | null): Promise<Page<AlarmEvent>> {
  const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (f.site_id) q.set('site_id', f.site_id);
  if (f.state !== 'all') q.set('state', f.state);
  if (f.kind) q.set('kind', f.kind);
  if (cursor) q.set('cursor', cursor);
  return api.get<Page<AlarmEvent>>(`/events?${q.toString()}`);
}

/** Alarm events filtered by site, state and kind, newest first, updated live; acknowledge in place. */
export function AlarmsPage() {
  useTitle('Alarms');
  const { query, route, path } = useLocation();
  const filters = filtersOf(query);
  const key = queryOf(filters);
  const sites = useLoad(() => all<Site>('/sites'), []);
  const [events, setEvents] = useState<AlarmEvent[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(false);
  const [announce, setAnnounce] = useState('');
  const [generation, setGeneration] = useState(0);
  // The filters the list on screen was read with: other filters empty it at once, a reload of the
  // same ones (after a reconnect) leaves it, and each item's state with it (an open
  // acknowledgement, its note, the focus), until the answer arrives.
  const shownKey = useRef<string | null>(null);
  // Live changes that arrived while the read was out: laid over its answer, which may predate them.
  const arrived = useRef<{ event: AlarmEvent; isNew: boolean }[] | null>(null);

  useEffect(() => {
    let stale = false;
    if (shownKey.current !== key) {
      shownKey.current = key;
      setEvents(null);
    }
    arrived.current = [];
    setLoading(true);
    loadPage(filters, null).then(
      (page) => {
        if (stale) return;
        const meanwhile = arrived.current ?? [];
        arrived.current = null;
        setEvents(meanwhile.reduce((list, a) => upserted(list, a.event, a.isNew, filters), page.data));
        setCursor(page.has_more ? page.next_cursor : null);
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (stale) return;
        arrived.current = null;
        setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
        setLoading(false);
      },
    );
    return () => {
      stale = true;
    };
  }, [key, generation]);

  const more = async () => {
    setLoading(true);
    try {
      const page = await loadPage(filters, cursor);
      setEvents((list) => [...(list ?? []), ...page.data.filter((e) => !list?.some((x) => x.id === e.id))]);
      setCursor(page.has_more ? page.next_cursor : null);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
    } finally {
      setLoading(false);
    }
  };

  const upsert = (e: AlarmEvent, isNew: boolean) => {
    arrived.current?.push({ event: e, isNew });
    setEvents((list) => (list ? upserted(list, e, isNew, filters) : list));
  };
  const status = useLive((e) => {
    if (e.type === 'resync') {
      setGeneration((g) => g + 1);
      return;
    }
    if (e.type !== 'alarm') return;
    const { change, event } = e;
    upsert(event, change === 'opened' || (change === 'resolved' && filters.state !== 'open'));
    if (change === 'opened' && matches(event, filters)) setAnnounce(`New alarm: ${alarmTitle(event)}`);
  });

  const set = (change: Partial<Filters>) => route(`${path}${queryOf({ ...filters, ...change })}`);
  const siteName = (id: string) => sites.data?.find((s) => s.id === id)?.name ?? id;

  return (
    <>
      <div class="page-head">
        <h1>Alarms</h1>
        <LiveStatus status={status} />
      </div>
      <form class="filters" aria-label="Filter alarms" onSubmit={(e) => e.preventDefault()}>
        <Field id="filter-site" label="Site">
          <select
            id="filter-site"
            value={filters.site_id}
            onChange={(e) => set({ site_id: e.currentTarget.value })}
          >
            <option value="">All sites</option>
            {(sites.data ?? []).map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="filter-state" label="State">
          <select
            id="filter-state"
            value={filters.state}
            onChange={(e) => set({ state: e.currentTarget.value as Filters['state'] })}
          >
            <option value="open">Open</option>
            <option value="resolved">Resolved</option>
            <option value="all">Open and resolved</option>
          </select>
        </Field>
        <Field id="filter-kind" label="Kind">
          <select
            id="filter-kind"
            value={filters.kind}
            onChange={(e) => set({ kind: e.currentTarget.value })}
          >
            <option value="">All kinds</option>
            {Object.entries(KIND_LABELS).map(([k, label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </Field>
      </form>
      <p class="visually-hidden" role="status" aria-live="polite">
        {announce}
      </p>
      <ErrorBox error={error ?? sites.error} />
      {events === null && loading && <Loading what="Loading alarms" />}
      {events && events.length === 0 && (
        <p>
          {filters.state === 'open'
            ? 'No open alarms. New ones appear here as they happen.'
            : 'No alarms match.'}
        </p>
      )}
      {events && events.length > 0 && (
        <ul class="event-list" aria-label="Alarm events, newest first">
          {events.map((e) => (
            <EventItem
              key={e.id}
              event={e}
              siteName={siteName(e.site_id)}
              onChange={(x) => upsert(x, false)}
            />
          ))}
        </ul>
      )}
      {cursor && (
        <button type="button" onClick={() => void more()} disabled={loading}>
          Show older alarms
        </button>
      )}
    </>
  );
}

function EventItem(props: { event: AlarmEvent; siteName: string; onChange: (e: AlarmEvent) => void }) {
  const { event } = props;
  const who = useUserName();
  const [acking, setAcking] = useState(false);
  // A cancelled acknowledgement gives the keyboard's focus back to the button that opened it.
  const openButton = useRef<HTMLButtonElement>(null);
  const [refocus, setRefocus] = useState(false);
  useEffect(() => {
    if (!refocus) return;
    openButton.current?.focus();
    setRefocus(false);
  }, [refocus]);
  // undefined while its read is out; null when the sensor is gone (its device was deleted).
  const [names, setNames] = useState<{ sensor: Sensor; device: Device } | null | undefined>(undefined);
  useEffect(() => {
    let stale = false;
    sensorWithDevice(event.sensor_id).then(
      (x) => {
        if (!stale) setNames(x);
      },
      () => {},
    );
    return () => {
      stale = true;
    };
  }, [event.sensor_id]);
  const unit = names?.sensor.unit ?? '';
  return (
    <li class="card event-item" data-event={event.id}>
      <div class="event-head">
        <EventBadge event={event} /> <RuleNote event={event} />{' '}
        <a href={`/app/events/${seg(event.id)}`} class="event-title">
          {alarmTitle(event, unit)}
        </a>
        <span class="event-where muted">
          {names ? (
            <a href={`/app/sensors/${seg(event.sensor_id)}`}>
              {deviceName(names.device)} · {kindName(names.sensor)}
            </a>
          ) : (
            <span>{names === null ? 'a removed sensor' : 'sensor…'}</span>
          )}{' '}
          · {props.siteName}
        </span>
      </div>
      <p class="event-meta">
        Since <Time ts={event.started_at} />
        {event.ended_at && (
          <>
            {' '}
            until <Time ts={event.ended_at} />
          </>
        )}
        {event.peak_value !== null && <> · peak {formatValue(event.peak_value, unit)}</>}
        {event.silenced && <> · silenced</>}
      </p>
      {event.acknowledged_at ? (
        <p class="event-ack">
          <span aria-hidden="true">✓</span> Acknowledged by {who(event.acknowledged_by)}{' '}
          <Time ts={event.acknowledged_at} />
          {event.ack_note && <>: “{event.ack_note}”</>}
        </p>
      ) : acking ? (
        <AckForm
          event={event}
          focus
          onDone={(e) => {
            setAcking(false);
            props.onChange(e);
          }}
          onCancel={() => {
            setAcking(false);
            setRefocus(true);
          }}
        />
      ) : (
        <button type="button" ref={openButton} onClick={() => setAcking(true)}>
          Acknowledge…
        </button>
      )}
    </li>
  );
}
