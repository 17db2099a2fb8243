import { useState } from 'preact/hooks';
import { all, api, ApiError, seg } from '../api.ts';
import { useSession } from '../session.tsx';
import { useLoad } from '../hooks.ts';
import { unitHint, type AlertCondition, type AlertRule, type Sensor } from '../types.ts';
import { Confirm } from './confirm.tsx';
import { conditionText } from './alarm-bits.tsx';
import { ErrorBox, Field, SeverityBadge } from './ui.tsx';

const TYPES = ['above', 'below', 'outside', 'no_data', 'rate_of_change'] as const;
type CondType = (typeof TYPES)[number];
const TYPE_LABELS: Record<CondType, string> = {
  above: 'Above a value',
  below: 'Below a value',
  outside: 'Outside a range',
  no_data: 'No data',
  rate_of_change: 'Changes fast',
};

/** Whether a rule judges this sensor's channel: by its channel list, or by its site and kind. */
function applies(r: AlertRule, s: Sensor, siteId: string): boolean {
  return r.channel_ids ? r.channel_ids.includes(s.channel_id) : r.site_id === siteId && r.kind === s.kind;
}

interface CondForm {
  type: CondType;
  value: string;
  min: string;
  max: string;
  minutes: string;
  change: string;
  within_min: string;
  direction: 'any' | 'rise' | 'fall';
  severity: 'warning' | 'critical';
  delay_min: string;
  hysteresis: string;
}

const blankCondition = (): CondForm => ({
  type: 'above',
  value: '',
  min: '',
  max: '',
  minutes: '60',
  change: '',
  within_min: '15',
  direction: 'any',
  severity: 'warning',
  delay_min: '0',
  hysteresis: '0',
});

const str = (n: number | undefined) => (n === undefined ? '' : String(n));
function toForm(c: AlertCondition): CondForm {
  return {
    ...blankCondition(),
    type: c.type as CondType,
    value: str(c.value),
    min: str(c.min),
    max: str(c.max),
    minutes: str(c.minutes ?? 60),
    change: str(c.change),
    within_min: str(c.within_min ?? 15),
    direction: c.direction ?? 'any',
    severity: c.severity,
    delay_min: str(c.delay_min ?? 0),
    hysteresis: str(c.hysteresis ?? 0),
  };
}

/** An empty input is sent as null: the API names what is missing. */
const num = (v: string) => (v.trim() === '' ? null : Number(v));

/** The condition as the API takes it: only the fields of its type. */
function fromForm(c: CondForm): Record<string, unknown> {
  const common = { severity: c.severity };
  const timing = { delay_min: num(c.delay_min), hysteresis: num(c.hysteresis) };
  if (c.type === 'above' || c.type === 'below')
    return { type: c.type, value: num(c.value), ...timing, ...common };
  if (c.type === 'outside') return { type: c.type, min: num(c.min), max: num(c.max), ...timing, ...common };
  if (c.type === 'no_data') return { type: c.type, minutes: num(c.minutes), ...common };
  return {
    type: c.type,
    change: num(c.change),
    within_min: num(c.within_min),
    direction: c.direction,
    ...timing,
    ...common,
  };
}

/** The API's message for a path such as `conditions.0.value` (or anything under it). */
function messageAt(error: ApiError | null, path: string): string | null {
  if (!error || !Array.isArray(error.details)) return null;
  for (const d of error.details as { path?: unknown; message?: unknown }[])
    if (
      typeof d.path === 'string' &&
      (d.path === path || d.path.startsWith(`${path}.`)) &&
      typeof d.message === 'string'
    )
      return d.message;
  return null;
}

/** Alert rules of this sensor's channel: listed in words, created, edited and deleted here. */
export function AlertRules({ sensor, siteId }: { sensor: Sensor; siteId: string }) {
  const list = useLoad(() => all<AlertRule>('/alert-rules'), [sensor.id]);
  const [editing, setEditing] = useState<AlertRule | 'new' | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const rules = (list.data ?? []).filter((r) => applies(r, sensor, siteId));

  const remove = async (r: AlertRule) => {
    setBusy(true);
    try {
      await api.del(`/alert-rules/${seg(r.id)}`);
      setError(null);
      setDeleting(null);
      list.reload();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="alert-rules-h">
      <h2 id="alert-rules-h">Alert rules</h2>
      <p class="muted">
        Rules with several conditions, each with its severity, delay and hysteresis; they run beside the
        thresholds above.
      </p>
      <ErrorBox error={list.error ?? error} />
      {list.data && rules.length === 0 && <p>No alert rule applies to this sensor.</p>}
      {rules.length > 0 && (
        <ul class="alert-rule-list">
          {rules.map((r) => (
            <li key={r.id}>
              <p>
                <strong>{r.name}</strong>
                {!r.enabled && <span class="muted"> (off)</span>}{' '}
                <span class="muted">
                  {r.channel_ids ? 'this channel' : `every ${sensor.kind} sensor of the site`}
                </span>
              </p>
              <ul>
                {r.conditions.map((c, i) => (
                  <li key={i}>
                    <SeverityBadge severity={c.severity} /> {conditionText(c, sensor.unit)}
                  </li>
                ))}
              </ul>
              {deleting === r.id ? (
                <Confirm
                  question={`Delete the rule “${r.name}”? Its open alarms end now.`}
                  yes="Delete"
                  busy={busy}
                  onYes={() => void remove(r)}
                  onNo={() => setDeleting(null)}
                />
              ) : (
                <div class="row-actions">
                  <button type="button" onClick={() => setEditing(r)}>
                    Edit<span class="visually-hidden"> the rule “{r.name}”</span>
                  </button>
                  <button type="button" class="danger" onClick={() => setDeleting(r.id)}>
                    Delete<span class="visually-hidden"> the rule “{r.name}”</span>
                  </button>
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
      {editing === null ? (
        <button type="button" onClick={() => setEditing('new')}>
          New alert rule
        </button>
      ) : (
        <RuleEditor
          key={editing === 'new' ? 'new' : editing.id}
          sensor={sensor}
          rule={editing === 'new' ? null : editing}
          onDone={() => {
            setEditing(null);
            list.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
    </section>
  );
}

/** Whether the rule's notification fits this form (one step at once, e-mail only). */
function simpleNotify(r: AlertRule | null): boolean {
  if (!r) return true;
  const steps = r.notify.steps;
  return (
    r.notify.repeat_every_min === null &&
    (steps.length === 0 ||
      (steps.length === 1 &&
        steps[0]!.after_min === 0 &&
        steps[0]!.webhook_ids.length === 0 &&
        steps[0]!.chat.length === 0))
  );
}

function RuleEditor(props: {
  sensor: Sensor;
  rule: AlertRule | null;
  onDone: () => void;
  onCancel: () => void;
}) {
  const { sensor, rule } = props;
  const { me } = useSession();
  const users = me?.users ?? [];
  const [name, setName] = useState(rule?.name ?? '');
  const [conds, setConds] = useState<CondForm[]>(rule ? rule.conditions.map(toForm) : [blankCondition()]);
  const [notifyUsers, setNotifyUsers] = useState<string[]>(rule?.notify.steps[0]?.user_ids ?? []);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const canNotify = simpleNotify(rule);
  const nameError = error?.fieldMessage('name') ?? null;
  const at = (i: number, f: string) => messageAt(error, `conditions.${i}.${f}`);
  const condsError = messageAt(error, 'conditions');
  const shown =
    nameError !== null ||
    conds.some((_c, i) => messageAt(error, `conditions.${i}`) !== null) ||
    messageAt(error, 'notify') !== null;
  const rangeError = error?.code === 'invalid_range' ? error.message : null;

  const setCond = (i: number, patch: Partial<CondForm>) =>
    setConds(conds.map((c, n) => (n === i ? { ...c, ...patch } : c)));

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const body: Record<string, unknown> = { name, conditions: conds.map(fromForm) };
    if (canNotify)
      body.notify = { steps: notifyUsers.length > 0 ? [{ after_min: 0, user_ids: notifyUsers }] : [] };
    try {
      if (rule) await api.patch(`/alert-rules/${seg(rule.id)}`, body);
      else await api.post('/alert-rules', { ...body, channel_ids: [sensor.channel_id] });
      setError(null);
      props.onDone();
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(0, 'client', String(err)));
    } finally {
      setBusy(false);
    }
  };

  const numInput = (i: number, f: keyof CondForm, label: string, step = 'any') => {
    const id = `cond-${i}-${f}`;
    return (
      <Field id={id} label={label} error={at(i, f)}>
        <input
          id={id}
          type="number"
          step={step}
          inputMode="decimal"
          value={conds[i]![f]}
          onInput={(e) => setCond(i, { [f]: e.currentTarget.value })}
        />
      </Field>
    );
  };
  const u = sensor.unit ? ` (${unitHint(sensor.unit)})` : '';

  return (
    <form class="alert-rule-form" onSubmit={(e) => void submit(e)} noValidate>
      <h3>{rule ? `Edit “${rule.name}”` : 'New alert rule for this sensor'}</h3>
      <Field id="alert-name" label="Name" error={nameError}>
        <input
          id="alert-name"
          type="text"
          maxLength={120}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </Field>
      {conds.map((c, i) => (
        <fieldset key={i} class="alert-condition">
          <legend>Condition {i + 1}</legend>
          <div class="field-row">
            <Field id={`cond-${i}-type`} label="When" error={at(i, 'type')}>
              <select
                id={`cond-${i}-type`}
                value={c.type}
                onChange={(e) => setCond(i, { type: e.currentTarget.value as CondType })}
              >
                {TYPES.map((t) => (
                  <option key={t} value={t}>
                    {TYPE_LABELS[t]}
                  </option>
                ))}
              </select>
            </Field>
            <Field id={`cond-${i}-severity`} label="Severity" error={at(i, 'severity')}>
              <select
                id={`cond-${i}-severity`}
                value={c.severity}
                onChange={(e) => setCond(i, { severity: e.currentTarget.value as CondForm['severity'] })}
              >
                <option value="warning">Warning</option>
                <option value="critical">Critical</option>
              </select>
            </Field>
          </div>
          <div class="field-row">
            {(c.type === 'above' || c.type === 'below') && numInput(i, 'value', `Value${u}`)}
            {c.type === 'outside' && numInput(i, 'min', `Lowest OK${u}`)}
            {c.type === 'outside' && numInput(i, 'max', `Highest OK${u}`)}
            {c.type === 'no_data' && numInput(i, 'minutes', 'No data for (minutes)', '1')}
            {c.type === 'rate_of_change' && numInput(i, 'change', `Change of more than${u}`)}
            {c.type === 'rate_of_change' && numInput(i, 'within_min', 'Within (minutes)', '1')}
            {c.type === 'rate_of_change' && (
              <Field id={`cond-${i}-direction`} label="Direction" error={at(i, 'direction')}>
                <select
                  id={`cond-${i}-direction`}
                  value={c.direction}
                  onChange={(e) => setCond(i, { direction: e.currentTarget.value as CondForm['direction'] })}
                >
                  <option value="any">Rise or fall</option>
                  <option value="rise">Rise</option>
                  <option value="fall">Fall</option>
                </select>
              </Field>
            )}
          </div>
          {c.type !== 'no_data' && (
            <div class="field-row">
              {numInput(i, 'delay_min', 'Delay (minutes)', '1')}
              {numInput(i, 'hysteresis', `Hysteresis${u}`)}
            </div>
          )}
          {conds.length > 1 && (
            <button type="button" onClick={() => setConds(conds.filter((_c, n) => n !== i))}>
              Remove condition {i + 1}
            </button>
          )}
        </fieldset>
      ))}
      {condsError && !conds.some((_c, i) => messageAt(error, `conditions.${i}`)) && (
        <p class="field-error" role="alert">
          {condsError}
        </p>
      )}
      {rangeError && (
        <p class="field-error" role="alert">
          {rangeError}
        </p>
      )}
      {conds.length < 10 && (
        <button type="button" onClick={() => setConds([...conds, blankCondition()])}>
          Add a condition
        </button>
      )}
      {canNotify ? (
        <fieldset class="alert-notify">
          <legend>Notify by e-mail when an alarm opens</legend>
          {users.map((user) => (
            <div class="field checkbox" key={user.id}>
              <input
                id={`notify-${user.id}`}
                type="checkbox"
                checked={notifyUsers.includes(user.id)}
                onChange={(e) =>
                  setNotifyUsers(
                    e.currentTarget.checked
                      ? [...notifyUsers, user.id]
                      : notifyUsers.filter((x) => x !== user.id),
                  )
                }
              />
              <label for={`notify-${user.id}`}>{user.email}</label>
            </div>
          ))}
          {messageAt(error, 'notify') && (
            <p class="field-error" role="alert">
              {messageAt(error, 'notify')}
            </p>
          )}
        </fieldset>
      ) : (
        <p class="muted">
          This rule's escalation steps are kept as they are (they are edited through the API).
        </p>
      )}
      {error && !shown && !rangeError && !condsError && <ErrorBox error={error} />}
      <div class="row-actions">
        <button type="submit" class="primary" disabled={busy}>
          {rule ? 'Save rule' : 'Create rule'}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
