import { useEffect, useRef, useState } from 'preact/hooks';
import { Chart } from './chart.tsx';
import { formatTime, formatValue, KIND_NAMES } from './format.ts';
import { publicApi, RANGES, type PinDetail, type Range, type Reading } from './public-api.ts';

const RANGE_NAMES: Record<Range, string> = { '24h': '24 hours', '7d': '7 days', '30d': '30 days' };

/** One sensor: its detail, a chart of the last 24 h, 7 d or 30 d, and a form to flag it. */
export function SensorPanel(props: { id: string; onClose: () => void }) {
  const [detail, setDetail] = useState<PinDetail | null>(null);
  const [range, setRange] = useState<Range>('24h');
  const [readings, setReadings] = useState<Reading[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLElement>(null);

  // On a narrow screen the panel sits below the map: bring it into view when a sensor is chosen.
  useEffect(() => {
    box.current?.scrollIntoView({ block: 'nearest' });
  }, [props.id]);

  useEffect(() => {
    let live = true;
    setDetail(null);
    setError(null);
    publicApi.detail(props.id).then(
      (d) => live && setDetail(d),
      (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      live = false;
    };
  }, [props.id]);

  useEffect(() => {
    let live = true;
    setReadings(null);
    publicApi.readings(props.id, range).then(
      (r) => live && setReadings(r),
      (err: unknown) => live && setError(err instanceof Error ? err.message : String(err)),
    );
    return () => {
      live = false;
    };
  }, [props.id, range]);

  const title = detail ? `${detail.nickname}` : 'Sensor';
  return (
    <section class="panel sensor-panel" aria-labelledby="sensor-title" ref={box}>
      <div class="panel-head">
        <h2 id="sensor-title">{title}</h2>
        <button type="button" class="close" aria-label="Close the sensor" onClick={props.onClose}>
          ×
        </button>
      </div>
      {error ? (
        <p role="alert" class="error">
          {error}
        </p>
      ) : null}
      {detail ? (
        <>
          <p class="now">
            <span class={`swatch kind-${detail.kind}`} aria-hidden="true" /> {KIND_NAMES[detail.kind]}
            {detail.label ? ` (${detail.label})` : ''}:{' '}
            <strong>{formatValue(detail.value, detail.unit)}</strong>
          </p>
          <dl class="facts">
            <dt>Place</dt>
            <dd>{detail.locationName}</dd>
            <dt>Last reading</dt>
            <dd>{formatTime(detail.ts)}</dd>
            <dt>Device</dt>
            <dd>
              {detail.vendor} {detail.model}
            </dd>
            {detail.organisation ? (
              <>
                <dt>Organisation</dt>
                <dd>{detail.organisation}</dd>
              </>
            ) : null}
          </dl>
        </>
      ) : null}
      <div class="ranges" role="group" aria-label="Chart range">
        {RANGES.map((r) => (
          <button type="button" key={r} aria-pressed={range === r} onClick={() => setRange(r)}>
            {RANGE_NAMES[r]}
          </button>
        ))}
      </div>
      {readings === null ? (
        <p class="muted">Loading readings…</p>
      ) : readings.length === 0 ? (
        <p class="muted">No readings in the last {RANGE_NAMES[range]}.</p>
      ) : (
        <Chart
          readings={readings}
          unit={detail?.unit ?? ''}
          label={`${detail ? KIND_NAMES[detail.kind] : 'Value'}, mean per ${range === '24h' ? '5 minutes' : range === '7d' ? 'hour' : '6 hours'}`}
        />
      )}
      <ReportForm id={props.id} />
    </section>
  );
}

function ReportForm(props: { id: string }) {
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState('');
  /** `idle`, `sending`, `sent`, or the error message of the last attempt. */
  const [state, setState] = useState<string>('idle');
  useEffect(() => {
    setOpen(false);
    setReason('');
    setState('idle');
  }, [props.id]);
  if (state === 'sent')
    return (
      <p class="muted" role="status">
        Thank you: an operator will look at it.
      </p>
    );
  if (!open)
    return (
      <button type="button" class="link" onClick={() => setOpen(true)}>
        Report a problem with this sensor
      </button>
    );
  return (
    <form
      class="report"
      onSubmit={(e) => {
        e.preventDefault();
        setState('sending');
        publicApi.report(props.id, reason).then(
          () => setState('sent'),
          (err: unknown) => setState(err instanceof Error ? err.message : String(err)),
        );
      }}
    >
      <label for="report-reason">What is wrong?</label>
      <textarea
        id="report-reason"
        required
        maxLength={500}
        value={reason}
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      {state !== 'idle' && state !== 'sending' ? (
        <p role="alert" class="error">
          {state}
        </p>
      ) : null}
      <button type="submit" disabled={state === 'sending' || reason.length === 0}>
        Send report
      </button>
    </form>
  );
}
