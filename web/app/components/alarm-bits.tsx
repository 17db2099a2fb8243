import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, seg } from '../api.ts';
import { useSession } from '../session.tsx';
import {
  isLeakUnit,
  unitSuffix,
  type AlarmEvent,
  type AlertCondition,
  type Device,
  type Sensor,
} from '../types.ts';
import { ErrorBox, Field, SeverityBadge } from './ui.tsx';

/** A condition in words: "Above 8 °C for 10 min (hysteresis 0.5) — critical". */
export function conditionText(c: AlertCondition, unit = ''): string {
  const u = unitSuffix(unit);
  let what: string;
  if (isLeakUnit(unit) && c.type === 'above') what = 'Leak detected';
  else if (isLeakUnit(unit) && c.type === 'below') what = 'Dry';
  else if (c.type === 'above') what = `Above ${c.value}${u}`;
  else if (c.type === 'below') what = `Below ${c.value}${u}`;
  else if (c.type === 'outside') what = `Outside ${c.min} to ${c.max}${u}`;
  else if (c.type === 'no_data') what = `No data for ${c.minutes} min`;
  else {
    const dir = c.direction === 'rise' ? 'Rises' : c.direction === 'fall' ? 'Falls' : 'Changes';
    what = `${dir} by more than ${c.change}${u} within ${c.within_min} min`;
  }
  if (c.delay_min) what += ` for ${c.delay_min} min`;
  if (c.hysteresis) what += ` (hysteresis ${c.hysteresis}${u})`;
  return what;
}

/**
 * What an alarm is, in words: "Above 5 °C", "Below 2 °C", "No data", "Leak detected" (a leak
 * sensor above its band); an alert rule's alarm by the condition that fired ("Rises by more than
 * 2 °C within 15 min").
 */
export function alarmTitle(
  e: Pick<AlarmEvent, 'kind' | 'ok_min' | 'ok_max' | 'condition'>,
  unit = '',
): string {
  const u = unitSuffix(unit);
  if (e.condition) return conditionText(e.condition, unit);
  if (isLeakUnit(unit) && e.kind === 'threshold_high') return 'Leak detected';
  if (isLeakUnit(unit) && e.kind === 'threshold_low') return 'Dry';
  if (e.kind === 'threshold_high') return e.ok_max === null ? 'Too high' : `Above ${e.ok_max}${u}`;
  if (e.kind === 'threshold_low') return e.ok_min === null ? 'Too low' : `Below ${e.ok_min}${u}`;
  if (e.kind === 'no_data') return 'No data';
  if (e.kind === 'rate_of_change') return 'Changed fast';
  return e.kind;
}

export const KIND_LABELS: Record<string, string> = {
  threshold_high: 'Too high',
  threshold_low: 'Too low',
  no_data: 'No data',
  rate_of_change: 'Changed fast',
};

/** An alert rule's alarm: its severity and a link to the sensor page, where the rules are listed. */
export function RuleNote({ event }: { event: AlarmEvent }) {
  if (!event.rule_id) return null;
  return (
    <>
      <SeverityBadge severity={event.severity} />{' '}
      <a class="muted" href={`/app/sensors/${seg(event.sensor_id)}#alert-rules-h`}>
        alert rule
      </a>
    </>
  );
}

/** The event's state as a badge: open alarms in the alarm style, resolved and withdrawn plainly. */
export function EventBadge({ event }: { event: AlarmEvent }) {
  if (event.withdrawn_at) return <span class="badge state-silent">Withdrawn</span>;
  if (event.state === 'open')
    return (
      <span class="badge state-alarm">
        <span aria-hidden="true">▲</span> Open
      </span>
    );
  return (
    <span class="badge state-ok">
      <span aria-hidden="true">✓</span> Resolved
    </span>
  );
}

/** A user id as the e-mail address of that user of the account, when known. */
export function useUserName(): (id: string | null) => string {
  const { me } = useSession();
  return (id) => (id ? (me?.users.find((u) => u.id === id)?.email ?? id) : 'someone');
}

/**
 * Sensors and their devices by sensor id, read once per page view: alarm lists name the sensor
 * of every event, and many events share a sensor.
 */
const sensorCache = new Map<string, Promise<{ sensor: Sensor; device: Device } | null>>();
export function sensorWithDevice(id: string): Promise<{ sensor: Sensor; device: Device } | null> {
  let hit = sensorCache.get(id);
  if (!hit) {
    hit = (async () => {
      try {
        const sensor = await api.get<Sensor>(`/sensors/${seg(id)}`);
        const device = await api.get<Device>(`/devices/${seg(sensor.device_id)}`);
        return { sensor, device };
      } catch (e) {
        // A deleted device's sensor is gone from the API; its events still name it by id.
        sensorCache.delete(id);
        if (e instanceof ApiError && e.status === 404) return null;
        throw e;
      }
    })();
    sensorCache.set(id, hit);
  }
  return hit;
}

/**
 * Acknowledge an alarm with a note (required by the API, may be empty). With `onCancel`, a Cancel
 * button (and Escape in the note) closes the form without acknowledging.
 */
export function AckForm(props: {
  event: AlarmEvent;
  onDone: (e: AlarmEvent) => void;
  onCancel?: () => void;
  focus?: boolean;
}) {
  const { event, onDone } = props;
  const [note, setNote] = useState('');
  const id = `ack-note-${event.id}`;
  // Opened by a button that the form replaces: the keyboard's focus moves into the form.
  useEffect(() => {
    if (props.focus) document.getElementById(id)?.focus();
  }, []);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const noteError = error?.fieldMessage('note') ?? null;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const updated = await api.post<AlarmEvent>(`/events/${seg(event.id)}/ack`, { note });
      setError(null);
      onDone(updated);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="ack-form" onSubmit={(e) => void submit(e)} noValidate>
      <Field id={id} label="Note" error={noteError} hint="What was done, for the record (shown in reports).">
        <textarea
          id={id}
          value={note}
          maxLength={2000}
          onInput={(e) => setNote(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Escape' && props.onCancel) props.onCancel();
          }}
        />
      </Field>
      {error && !noteError && <ErrorBox error={error} />}
      <button type="submit" class="primary" disabled={busy}>
        Acknowledge
      </button>
      {props.onCancel && (
        <>
          {' '}
          <button type="button" onClick={props.onCancel} disabled={busy}>
            Cancel
          </button>
        </>
      )}
    </form>
  );
}
