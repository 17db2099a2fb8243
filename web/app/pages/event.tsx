import { useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api, seg } from '../api.ts';
import {
  AckForm,
  alarmTitle,
  conditionText,
  EventBadge,
  sensorWithDevice,
  useUserName,
} from '../components/alarm-bits.tsx';
import { SensorChart } from '../components/sensor-chart.tsx';
import { LiveStatus } from '../components/live-status.tsx';
import { LoadFailed, Loading, SeverityBadge, Time } from '../components/ui.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { useLive, useLiveCopies } from '../live.ts';
import { sensorName as kindName } from '../site-helpers.ts';
import { deviceName, formatValue, unitSuffix, type AlarmEvent, type AlertRule, type Site } from '../types.ts';
import '../sensors.css';

/** Measurements shown either side of the event on its chart. */
const MARGIN_MS = 3 * 3600_000;

async function loadEvent(id: string) {
  const event = await api.get<AlarmEvent>(`/events/${seg(id)}`);
  const [names, site] = await Promise.all([
    sensorWithDevice(event.sensor_id),
    api.get<Site>(`/sites/${seg(event.site_id)}`).catch(() => null),
  ]);
  return { event, names, site };
}

interface Step {
  at: string;
  what: string;
  tone: 'alarm' | 'ok' | 'info';
  detail?: string;
}

/**
 * The event's history as the API records it: the event object keeps when the excursion began, when
 * it became an alarm, its acknowledgement, its end or withdrawal, and when later data last changed
 * it (there is no separate log of each change).
 */
function history(e: AlarmEvent, unit: string, who: (id: string | null) => string): Step[] {
  const steps: Step[] = [];
  if (e.kind === 'no_data') {
    steps.push({ at: e.started_at, what: 'No data: the sensor stopped sending', tone: 'alarm' });
  } else {
    steps.push({
      at: e.started_at,
      what:
        e.kind === 'rate_of_change'
          ? 'First reading that changed too fast'
          : `First reading ${e.kind === 'threshold_high' ? 'above' : 'below'} ${e.rule_id ? 'the bound' : 'the band'}`,
      tone: 'info',
      detail:
        e.ok_min !== null && e.ok_max !== null
          ? `band ${e.ok_min} to ${e.ok_max}${unitSuffix(unit)}`
          : undefined,
    });
    if (e.alarm_at)
      steps.push({
        at: e.alarm_at,
        what: e.silenced
          ? 'Alarm raised inside a silence window (not announced then)'
          : 'Alarm raised, notifications sent',
        tone: 'alarm',
        detail:
          e.alarm_at === e.started_at
            ? e.rule_id
              ? 'no delay'
              : 'no grace period'
            : e.rule_id
              ? 'after the delay'
              : 'after the grace period',
      });
  }
  if (e.acknowledged_at)
    steps.push({
      at: e.acknowledged_at,
      what: `Acknowledged by ${who(e.acknowledged_by)}`,
      tone: 'info',
      detail: e.ack_note ? `“${e.ack_note}”` : 'no note',
    });
  if (e.ended_at)
    steps.push({
      at: e.ended_at,
      what:
        e.kind === 'no_data' ? 'Data again' : e.kind === 'rate_of_change' ? 'Steady again' : 'Back in range',
      tone: 'ok',
      detail: e.peak_value !== null ? `peak ${formatValue(e.peak_value, unit)}` : undefined,
    });
  if (e.withdrawn_at)
    steps.push({
      at: e.withdrawn_at,
      what: 'Withdrawn: later data showed no alarm',
      tone: 'ok',
    });
  if (e.updated_at !== e.created_at && !steps.some((s) => s.at === e.updated_at))
    steps.push({ at: e.updated_at, what: 'Event record last updated', tone: 'info' });
  return steps.sort((a, b) => a.at.localeCompare(b.at));
}

/** One alarm event (alarm mails link here): what, where, its history, its chart, acknowledge. */
export function EventPage() {
  const { params } = useRoute();
  const id = params.id!;
  const loaded = useLoad(() => loadEvent(id), [id]);
  // The event as it arrives live or from an acknowledgement, laid over the loaded one while newer.
  const copies = useLiveCopies<AlarmEvent>();
  const setLive = copies.put;
  const who = useUserName();
  // The chart's range ends at the last news of the event: the time the page opened, moved on by
  // each live change of the event or reading of its sensor (renders alone do not move it, which
  // would read the chart again each time).
  const [chartNow, setChartNow] = useState(Date.now);
  const event = loaded.data ? copies.get(loaded.data.event, loaded.loadedAt) : undefined;
  const names = loaded.data?.names ?? null;
  const unit = names?.sensor.unit ?? '';
  useTitle(event ? `${alarmTitle(event, unit)} (alarm)` : 'Alarm');
  const status = useLive((e) => {
    if (e.type === 'alarm' && e.event.id === id) {
      setLive(e.event);
      setChartNow(Date.now());
    } else if (e.type === 'sensor' && event && e.sensor.id === event.sensor_id) {
      setChartNow(Date.now());
    } else if (e.type === 'resync') {
      setChartNow(Date.now());
      loaded.reload();
    }
  });

  if (loaded.error && !loaded.data)
    return (
      <LoadFailed
        error={loaded.error}
        what="alarm"
        back={{ href: '/app/alarms', label: 'Back to the alarms' }}
      />
    );
  if (!event) return <Loading />;
  const site = loaded.data?.site;
  const endMs = Math.min(chartNow, (event.ended_at ? Date.parse(event.ended_at) : chartNow) + MARGIN_MS);
  const startMs = Date.parse(event.started_at) - MARGIN_MS;
  return (
    <>
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href="/app/alarms">Alarms</a>
      </nav>
      <div class="page-head">
        <h1>
          {alarmTitle(event, unit)}
          {names && (
            <>
              {' '}
              · {deviceName(names.device)} {kindName(names.sensor)}
            </>
          )}
        </h1>
      </div>
      <p>
        <EventBadge event={event} /> <SeverityBadge severity={event.severity} />{' '}
        <LiveStatus status={status} />
      </p>
      <dl class="facts">
        <dt>Sensor</dt>
        <dd>
          {names ? (
            <a href={`/app/sensors/${seg(event.sensor_id)}`}>
              {deviceName(names.device)} · {kindName(names.sensor)}
            </a>
          ) : (
            <span>{event.sensor_id} (device deleted)</span>
          )}
        </dd>
        <dt>Site</dt>
        <dd>{site ? <a href={`/app/sites/${seg(site.id)}`}>{site.name}</a> : event.site_id}</dd>
        <dt>Since</dt>
        <dd>
          <Time ts={event.started_at} />
          {site && (
            <span class="muted">
              {' '}
              (
              {new Date(event.started_at).toLocaleString(undefined, {
                timeZone: site.timezone,
                dateStyle: 'medium',
                timeStyle: 'short',
              })}{' '}
              site time, {site.timezone})
            </span>
          )}
        </dd>
        <dt>Ended</dt>
        <dd>{event.ended_at ? <Time ts={event.ended_at} /> : 'still open'}</dd>
        {event.rule_id && (
          <>
            <dt>Alert rule</dt>
            <dd>
              <RuleName id={event.rule_id} sensorId={event.sensor_id} />
              {event.condition && (
                <span class="muted">
                  {' '}
                  · condition {event.condition.index + 1}: {conditionText(event.condition, unit)}
                </span>
              )}
            </dd>
          </>
        )}
        {event.kind !== 'no_data' && !event.rule_id && (
          <>
            <dt>Operating band</dt>
            <dd>
              {event.ok_min} to {event.ok_max}
              {unitSuffix(unit)}
            </dd>
            <dt>Peak</dt>
            <dd>{formatValue(event.peak_value, unit)}</dd>
          </>
        )}
        {event.rule_id && event.kind !== 'no_data' && (
          <>
            <dt>{event.kind === 'rate_of_change' ? 'Largest change' : 'Peak'}</dt>
            <dd>{formatValue(event.peak_value, unit)}</dd>
          </>
        )}
      </dl>
      <section aria-labelledby="history-h">
        <h2 id="history-h">History</h2>
        <ol class="history">
          {history(event, unit, who).map((s) => (
            <li key={s.at + s.what} class={s.tone}>
              <Time ts={s.at} /> — {s.what}
              {s.detail && <span class="muted"> ({s.detail})</span>}
            </li>
          ))}
        </ol>
      </section>
      <section aria-labelledby="ack-h">
        <h2 id="ack-h">Acknowledgement</h2>
        {event.acknowledged_at ? (
          <p class="event-ack">
            <span aria-hidden="true">✓</span> Acknowledged by {who(event.acknowledged_by)}{' '}
            <Time ts={event.acknowledged_at} />
            {event.ack_note && <>: “{event.ack_note}”</>}
          </p>
        ) : (
          <AckForm event={event} onDone={setLive} />
        )}
      </section>
      {names && (
        <section aria-labelledby="event-chart-h">
          <h2 id="event-chart-h">Measurements around the alarm</h2>
          <SensorChart
            channelId={event.channel_id}
            label={`${deviceName(names.device)} · ${kindName(names.sensor)}`}
            unit={unit}
            from={new Date(startMs).toISOString()}
            to={new Date(Math.max(endMs, startMs + 60_000)).toISOString()}
            band={
              event.ok_min !== null && event.ok_max !== null && !event.rule_id
                ? { min: event.ok_min, max: event.ok_max }
                : null
            }
            gapSeconds={names.sensor.no_data_min * 60}
            alarms={[
              {
                from: Date.parse(event.alarm_at ?? event.started_at) / 1000,
                to: event.ended_at ? Date.parse(event.ended_at) / 1000 : null,
              },
            ]}
          />
        </section>
      )}
    </>
  );
}

/** The alert rule's name, linked to the sensor page where it is edited; a deleted rule by id. */
function RuleName({ id, sensorId }: { id: string; sensorId: string }) {
  const rule = useLoad(() => api.get<AlertRule>(`/alert-rules/${seg(id)}`), [id]);
  if (rule.error) return <span>{id} (deleted)</span>;
  return <a href={`/app/sensors/${seg(sensorId)}#alert-rules-h`}>{rule.data ? rule.data.name : id}</a>;
}
