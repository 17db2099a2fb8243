import { cloneElement, isValidElement, type ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import type { ApiError } from '../api.ts';

/** The five sensor states, each with a label and a shape besides its colour (never colour alone). */
export const STATES = {
  ok: { label: 'OK', shape: '●' },
  grace: { label: 'Grace', shape: '◆' },
  alarm: { label: 'Alarm', shape: '▲' },
  silent: { label: 'Silenced', shape: '■' },
  no_data: { label: 'No data', shape: '○' },
} as const;
export type SensorState = keyof typeof STATES;

/** The label and shape a state is shown with (see StateBadge). */
export function stateLook(state: string, ruleEnabled?: boolean): { label: string; shape: string } {
  const known = STATES[state as SensorState] ?? { label: state, shape: '?' };
  return state === 'silent' && ruleEnabled === false ? { ...known, label: 'Rule off' } : known;
}

/**
 * A state as a badge. `silent` has two causes: a silence window, or a rule switched off (a signal
 * or a battery without bounds); with `ruleEnabled` false it says "Rule off", so nobody looks for a
 * silence that does not exist.
 */
export function StateBadge({ state, ruleEnabled }: { state: string; ruleEnabled?: boolean }) {
  const s = stateLook(state, ruleEnabled);
  return (
    <span class={`badge state-${state}`}>
      <span aria-hidden="true">{s.shape}</span> {s.label}
    </span>
  );
}

/** A severity as a badge: label and shape differ, not the colour alone. */
export function SeverityBadge({ severity }: { severity: string | null | undefined }) {
  if (!severity) return null;
  const critical = severity === 'critical';
  return (
    <span class={`badge severity-${critical ? 'critical' : 'warning'}`}>
      <span aria-hidden="true">{critical ? '⬣' : '△'}</span> {critical ? 'Critical' : 'Warning'}
    </span>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

/** An error answer as a message the user can act on; `code` stays visible for support. */
export function ErrorBox({ error }: { error: ApiError | null }) {
  if (!error) return null;
  return (
    <div class="error-box" role="alert">
      {error.message} <span class="muted">({error.code})</span>
    </div>
  );
}

/**
 * A detail page whose thing could not be loaded: a link to something deleted, or of another
 * account, says so in words with the way back; any other failure shows its error.
 */
export function LoadFailed({
  error,
  what,
  back,
}: {
  error: ApiError;
  what: string;
  back?: { href: string; label: string };
}) {
  const way = back ?? { href: '/app/', label: 'Back to the overview' };
  const missing = error.status === 404;
  return (
    <>
      <h1>
        {missing ? `${what[0]!.toUpperCase()}${what.slice(1)} not found` : `This ${what} could not be loaded`}
      </h1>
      {missing ? (
        <p>
          There is no such {what} in this account: it may have been deleted, or the link is not for this
          account.
        </p>
      ) : (
        <ErrorBox error={error} />
      )}
      <p>
        <a href={way.href}>{way.label}</a>
      </p>
    </>
  );
}

/** A labelled form field with its validation message beside it, tied by aria-describedby. */
export function Field(props: {
  id: string;
  label: string;
  error?: string | null;
  hint?: string;
  children: ComponentChildren;
}) {
  // The hint and the message are tied to the input (a screen reader reads them with it), unless
  // the input names its own descriptions.
  const described =
    [props.hint && `${props.id}-hint`, props.error && `${props.id}-error`].filter(Boolean).join(' ') ||
    undefined;
  const child = props.children;
  const input =
    isValidElement(child) && (child.props as Record<string, unknown>)['aria-describedby'] === undefined
      ? cloneElement(child, {
          'aria-describedby': described,
          'aria-invalid': props.error ? true : undefined,
        })
      : child;
  return (
    <div class={`field${props.error ? ' has-error' : ''}`}>
      <label for={props.id}>{props.label}</label>
      {input}
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={`${props.id}-error`} role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

/** A labelled choice among fixed options, with its validation message: a `Field` around a `select`. */
export function SelectField(props: {
  id: string;
  label: string;
  error?: string | null;
  hint?: string;
  value: string;
  onChange: (value: string) => void;
  options: readonly { value: string; text: string }[];
}) {
  return (
    <Field
      id={props.id}
      label={props.label}
      error={props.error ?? null}
      {...(props.hint ? { hint: props.hint } : {})}
    >
      <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.text}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** A secret or URL shown once, with a button that copies it. */
export function CopyValue({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState<'copied' | 'selected' | null>(null);
  const code = useRef<HTMLElement>(null);
  // The clipboard API exists on secure pages only (HTTPS or localhost) and may be refused: then
  // the value is selected, so Ctrl+C (or the phone's own Copy) takes it.
  const select = () => {
    const range = document.createRange();
    range.selectNodeContents(code.current!);
    const selection = window.getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    setCopied('selected');
  };
  const copy = () => {
    if (!navigator.clipboard) return select();
    navigator.clipboard.writeText(value).then(() => setCopied('copied'), select);
  };
  return (
    <div class="copy-value">
      <span class="copy-label">{label}</span>
      <code ref={code}>{value}</code>
      <button type="button" onClick={copy} aria-label={`Copy ${label}`}>
        {copied === 'copied' ? 'Copied' : 'Copy'}
      </button>
      <span role="status" class="muted small">
        {copied === 'selected' ? 'Selected: copy it with Ctrl+C (or your phone’s Copy).' : ''}
      </span>
    </div>
  );
}

/** A time as the reader's local date and time, with the exact UTC instant on hover. */
export function Time({ ts, timeZone }: { ts: string | null | undefined; timeZone?: string }) {
  if (!ts) return <span class="muted">never</span>;
  const d = new Date(ts);
  const text = d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short', timeZone });
  // In a given zone (a site's, not the browser's), the zone is named: "1 Dec 2026, 00:05 CET".
  const zone = timeZone
    ? new Intl.DateTimeFormat(undefined, { timeZone, timeZoneName: 'short' })
        .formatToParts(d)
        .find((p) => p.type === 'timeZoneName')?.value
    : undefined;
  return (
    <time dateTime={ts} title={ts}>
      {zone ? `${text} ${zone}` : text}
    </time>
  );
}

/** How long ago, in words ("3 min ago"), for last-seen columns. */
export function Ago({ ts, now = Date.now() }: { ts: string | null | undefined; now?: number }) {
  if (!ts) return <span class="muted">never</span>;
  const s = Math.max(0, Math.round((now - new Date(ts).getTime()) / 1000));
  const text =
    s < 60
      ? `${s} s ago`
      : s < 3600
        ? `${Math.round(s / 60)} min ago`
        : s < 86400
          ? `${Math.round(s / 3600)} h ago`
          : `${Math.round(s / 86400)} d ago`;
  return (
    <time dateTime={ts} title={ts}>
      {text}
    </time>
  );
}
