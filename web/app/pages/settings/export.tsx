import { useState } from 'preact/hooks';
import { ApiError } from '../../api.ts';
import { postForFile } from '../../components/actions.tsx';
import { ErrorBox } from '../../components/ui.tsx';

/** The account export: one ZIP with every measurement, alarm event and audit entry as CSV. */
export function Export() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  return (
    <section aria-labelledby="export-title">
      <h2 id="export-title">Export the account’s data</h2>
      <div class="card">
        <p>
          One ZIP file with CSV tables: <code>measurements.csv</code> (every stored reading of every channel),{' '}
          <code>events.csv</code> (the alarm events with acknowledgements) and <code>audit.csv</code> (the
          audit log), plus <code>meta.json</code> describing every column. It is built as it downloads: a
          large account takes a while.
        </p>
        <button
          type="button"
          class="primary"
          disabled={busy}
          onClick={() => {
            setBusy(true);
            setError(null);
            setSaved(null);
            postForFile('/accounts/me/export', 'export.zip').then(
              (name) => {
                setSaved(name);
                setBusy(false);
              },
              (e: unknown) => {
                setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
                setBusy(false);
              },
            );
          }}
        >
          {busy ? 'Preparing the export…' : 'Download the export (ZIP)'}
        </button>
        <p role="status" class="muted">
          {saved ? `Saved as ${saved}.` : ''}
        </p>
        <ErrorBox error={error} />
      </div>
    </section>
  );
}
