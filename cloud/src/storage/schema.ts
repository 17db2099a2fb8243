import type { Generated } from 'kysely';

/**
 * The tables as the data layer sees them. Times are integers of microseconds since the epoch;
 * booleans are 0/1 integers (SQLite has no boolean type); JSON is stored as text.
 */
export interface Tables {
  accounts: { id: string; name: string; created_at: number };
  users: { id: string; account_id: string; email: string; created_at: number };
  login_codes: {
    id: string;
    email: string;
    code_hash: string;
    link_hash: string;
    state: 'issued' | 'used' | 'invalidated';
    attempts: number;
    created_at: number;
    expires_at: number;
    /** Hash of the `os_signin` cookie of the browser that asked for the code (0016). */
    browser_hash: string | null;
  };
  sessions: {
    id: string;
    user_id: string;
    account_id: string;
    secret_hash: string;
    created_at: number;
    last_seen_at: number;
    expires_at: number;
    revoked_at: number | null;
  };
  api_tokens: {
    id: string;
    account_id: string;
    user_id: string;
    label: string;
    scope: 'read' | 'write' | 'admin';
    token_hash: string;
    created_at: number;
    last_used_at: number | null;
    revoked_at: number | null;
  };
  sites: {
    id: string;
    account_id: string;
    name: string;
    vertical: string;
    timezone: string;
    created_at: number;
    deleted_at: number | null;
  };
  devices: {
    id: string;
    account_id: string;
    site_id: string;
    local_id: string;
    name: string;
    notes: string;
    model: string;
    fw_version: string | null;
    token_hash: string | null;
    token_issued_at: number;
    last_seen_at: number | null;
    online: number;
    created_at: number;
    deleted_at: number | null;
  };
  sensors: {
    seq: Generated<number>;
    id: string;
    channel_id: string;
    account_id: string;
    device_id: string;
    kind: string;
    label: string | null;
    /** `label` or '' — the uniqueness key of (device, kind, label), as NULLs never collide in an index. */
    label_key: string;
    unit: string;
    ok_min: number;
    ok_max: number;
    grace_min: number;
    rule_enabled: number;
    no_data_min: number;
    last_value: number | null;
    last_ts: number | null;
    state: 'ok' | 'grace' | 'alarm' | 'silent' | 'no_data';
    created_at: number;
    /**
     * Migration 0002 (rule engine): the oldest measurement time ingest wrote since the engine last
     * evaluated the channel, and a counter ingest bumps with it. Optional here because only ingest's
     * own SQL and the engine set them; rows are created without them.
     */
    eval_from?: number | null;
    eval_gen?: number;
  };
  /** `grp` is `sensor_seq >> MEASUREMENT_GROUP_SHIFT` (storage/layout.ts). */
  measurements: { grp: number; sensor_seq: number; ts: number; value: number };
  /** Per-minute, -hour and -day aggregates of each channel (`res` in seconds), kept by ingest. */
  measurement_rollups: {
    /** `sensor_seq >> ROLLUP_GROUP_SHIFT` (storage/layout.ts). */
    grp: number;
    res: number;
    bucket: number;
    sensor_seq: number;
    n: number;
    total: number;
    lo: number;
    hi: number;
    first_ts: number;
    first_value: number;
    last_ts: number;
    last_value: number;
  };
  /** Device moves: measurements with `ts < effective_at` belong to `from_site_id`. */
  device_moves: {
    id: string;
    account_id: string;
    device_id: string;
    from_site_id: string;
    to_site_id: string;
    effective_at: number;
    applied_at: number | null;
    created_by: string;
    created_at: number;
  };
  audit_log: {
    id: string;
    account_id: string;
    ts: number;
    kind: string;
    actor: string;
    target: string;
    details: string;
    /** The entry's place in its account's hash chain, from 1; NULL for entries older than the chain. */
    seq: number | null;
    /** The hash of the account's previous entry; NULL for the chain's first entry. */
    prev_hash: string | null;
    /** Lower-case hex SHA-256 of the entry (cloud/src/audit/audit-chain.ts). */
    hash: string | null;
  };
  /** Scheduled reports; a run is claimed by moving `next_period_end` and `next_run_at` forward. */
  report_schedules: {
    id: string;
    account_id: string;
    site_id: string;
    template: string;
    language: string;
    every: string;
    /** JSON array of e-mail addresses. */
    recipients: string;
    created_by: string;
    created_at: number;
    next_period_end: number;
    next_run_at: number;
  };
  /** One per schedule and period: the report made for it, and when its mails were queued. */
  report_schedule_runs: {
    id: string;
    schedule_id: string;
    account_id: string;
    period_from: number;
    period_to: number;
    /** JSON array of e-mail addresses, as the schedule had them when the run was claimed. */
    recipients: string;
    report_id: string | null;
    mailed_at: number | null;
    error: string | null;
    created_at: number;
  };
  /** Random keys of the installation, made by migration 0018 (`flag_reporter`). */
  installation_secrets: { name: string; value: string };
  /** Whether an address agreed to an account's scheduled reports (0017). */
  report_recipients: {
    id: string;
    account_id: string;
    /** Lower-cased. */
    address: string;
    state: 'pending' | 'confirmed' | 'declined';
    /** `rcp_…`: the secret of the links in the mails to this address. */
    token: string;
    asked_by: string | null;
    asked_at: number;
    answered_at: number | null;
  };
  /** Each account's last audit chain link; appends lock this row. */
  audit_chain_heads: {
    account_id: string;
    seq: number;
    entry_id: string | null;
    hash: string | null;
  };
  idempotency_keys: {
    scope: string;
    key: string;
    fingerprint: string;
    status: number | null;
    response: string | null;
    created_at: number;
    expires_at: number;
  };
  rate_limit_counters: { bucket: string; window_start: number; count: number };
  /** Points written by ingest and not yet folded into derived state (migration 0005, ingest.fold.ts). */
  ingest_journal: { id: Generated<number>; points: Uint8Array; created_at: number };
  /** Inbound integrations (migration 0011): a `whk_` token each, for one site of an account. */
  integrations: {
    id: string;
    account_id: string;
    site_id: string;
    kind: 'chirpstack' | 'ttn' | 'shelly';
    name: string;
    /** The model of the devices it creates; null: the kind's default. */
    default_model: string | null;
    token_hash: string;
    created_by: string;
    created_at: number;
    token_issued_at: number;
    last_used_at: number | null;
    deleted_at: number | null;
  };
  /** Each uplink an integration delivered, with the time its measurements were stored under. */
  integration_uplinks: { integration_id: string; uplink_key: string; ts: number; created_at: number };
  /** The last event of each kind per device of an integration (`detail`: JSON). */
  integration_device_events: {
    integration_id: string;
    dev_eui: string;
    event: string;
    at: number;
    detail: string;
  };
  /** MQTT bridges (migration 0004): one client certificate each, known by its fingerprint. */
  bridges: {
    id: string;
    account_id: string;
    site_id: string;
    name: string;
    cert_serial: string;
    cert_fingerprint: string;
    expires_at: number;
    created_at: number;
    last_seen_at: number | null;
    revoked_at: number | null;
  };
  /** The bridge PKI shared by replicas (migration 0014): `ca` and `server`, PEM. */
  pki_keys: { name: string; cert_pem: string; key_pem: string; updated_at: number };
  /** Live bridge connections per process (migration 0014), refreshed while they last. */
  bridge_presence: { bridge_id: string; replica_id: string; seen_at: number };
  jobs: {
    id: string;
    kind: string;
    payload: string;
    run_at: number;
    attempts: number;
    locked_until: number | null;
    done_at: number | null;
    failed_at: number | null;
    last_error: string | null;
    created_at: number;
  };
  /** Every rule a sensor had, from `valid_from` on (migration 0002); none until the first change. */
  rule_versions: {
    sensor_seq: number;
    valid_from: number;
    ok_min: number;
    ok_max: number;
    grace_min: number;
    rule_enabled: number;
    no_data_min: number;
  };
  /** The rule engine's state of a channel at its newest evaluated measurement (rules/tracker). */
  channel_trackers: {
    sensor_seq: number;
    last_ts: number | null;
    run_kind: 'threshold_high' | 'threshold_low' | null;
    run_start: number | null;
    run_peak: number | null;
    has_open: number;
    due_at: number | null;
    updated_at: number;
  };
  alarm_events: {
    id: string;
    account_id: string;
    site_id: string;
    device_id: string;
    sensor_id: string;
    channel_id: string;
    sensor_seq: number;
    kind: 'threshold_high' | 'threshold_low' | 'no_data';
    started_at: number;
    alarm_at: number;
    ended_at: number | null;
    ok_min: number;
    ok_max: number;
    peak_value: number | null;
    silenced: number;
    acknowledged_at: number | null;
    acknowledged_by: string | null;
    ack_note: string | null;
    withdrawn_at: number | null;
    notified_open_at: number | null;
    notified_resolved_at: number | null;
    created_at: number;
    updated_at: number;
  };
  /** Alert rules as they are now (migration 0013); JSON as text; soft-deleted. */
  alert_rules: {
    id: string;
    account_id: string;
    name: string;
    enabled: number;
    site_id: string | null;
    kind: string | null;
    /** JSON array of channel ids, or null for every channel of `kind` on `site_id`. */
    channel_ids: string | null;
    conditions: string;
    schedule: string | null;
    notify: string;
    created_by: string;
    created_at: number;
    updated_at: number;
    deleted_at: number | null;
  };
  /** Every version of an alert rule from `valid_from` on (what the evaluator judges by). */
  alert_rule_versions: {
    rule_id: string;
    valid_from: number;
    enabled: number;
    site_id: string | null;
    kind: string | null;
    channel_ids: string | null;
    conditions: string;
    schedule: string | null;
  };
  /** Channels with measurements the alert engine has not seen yet (oldest ts, generation). */
  alert_marks: { sensor_seq: number; from_ts: number; gen: number };
  /** Per (alert rule, channel): the evaluator's state and checkpoints (JSON), and the next due time. */
  alert_trackers: {
    rule_id: string;
    sensor_seq: number;
    state: string | null;
    due_at: number | null;
    updated_at: number;
  };
  /** Alarm events of alert rules. */
  alert_events: {
    id: string;
    account_id: string;
    rule_id: string;
    version_from: number;
    cond: number;
    /** JSON: the condition that fired, as written in the rule. */
    condition: string;
    severity: 'warning' | 'critical';
    site_id: string;
    device_id: string;
    sensor_id: string;
    channel_id: string;
    sensor_seq: number;
    kind: 'threshold_high' | 'threshold_low' | 'no_data' | 'rate_of_change';
    started_at: number;
    alarm_at: number;
    ended_at: number | null;
    peak_value: number | null;
    silenced: number;
    acknowledged_at: number | null;
    acknowledged_by: string | null;
    ack_note: string | null;
    withdrawn_at: number | null;
    notified_open_at: number | null;
    notified_resolved_at: number | null;
    notify_n: number;
    created_at: number;
    updated_at: number;
  };
  silences: {
    id: string;
    account_id: string;
    sensor_id: string;
    sensor_seq: number;
    from_ts: number;
    to_ts: number;
    reason: string;
    created_by: string;
    created_at: number;
    ended_at: number | null;
    ended_by: string | null;
  };
  webhooks: {
    id: string;
    account_id: string;
    url: string;
    /** JSON array of event types */
    events: string;
    /** `whsec_…`, kept in plaintext: it is the HMAC key of every delivery. */
    secret: string;
    created_by: string;
    created_at: number;
    deleted_at: number | null;
  };
  webhook_deliveries: {
    id: string;
    account_id: string;
    webhook_id: string;
    type: string;
    /** The exact body that is signed and sent on every attempt. */
    body: string;
    state: 'pending' | 'delivered' | 'failed' | 'cancelled';
    attempts: number;
    created_at: number;
    last_attempt_at: number | null;
    next_attempt_at: number | null;
    delivered_at: number | null;
    last_status: number | null;
    last_error: string | null;
  };
  webhook_attempts: {
    id: Generated<number>;
    delivery_id: string;
    attempt: number;
    at: number;
    status: number | null;
    error: string | null;
    duration_ms: number;
  };
  /** Reports (migration 0008): `state` queued → running → ready | failed. */
  reports: {
    id: string;
    account_id: string;
    site_id: string;
    template: string;
    language: string;
    period_from: number;
    period_to: number;
    state: 'queued' | 'running' | 'ready' | 'failed';
    error: string | null;
    created_at: number;
    ready_at: number | null;
    size_bytes: number | null;
    /** Lower-case hex SHA-256 of the PDF. */
    sha256: string | null;
    created_by: string;
  };
  /** A ready report's PDF, kept in the database (docs/operations.md, "Reports"). */
  report_files: { report_id: string; content: Uint8Array };
  /** Public community API (migration 0012): what an owner publishes about a device. */
  public_devices: {
    device_id: string;
    account_id: string;
    enabled: number;
    nickname: string | null;
    location_name: string | null;
    organisation: string | null;
    lat: number | null;
    lon: number | null;
    updated_at: number;
  };
  /** Sensors an operator took off the public map. */
  public_hidden_sensors: { sensor_id: string; hidden_at: number };
  /** Reports about public sensors; `resolution` is `hidden` or `dismissed` once an operator acts. */
  public_flags: {
    id: string;
    sensor_id: string;
    reason: string;
    /** A hash of the reporter's address: repeat reporters show, addresses are not kept. */
    reporter: string;
    created_at: number;
    resolved_at: number | null;
    resolution: 'hidden' | 'dismissed' | null;
  };
  /** One row (`id` 1): grows with every change of what is public (cache invalidation across replicas). */
  public_epoch: { id: number; epoch: number };
}
