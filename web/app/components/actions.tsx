import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { API_BASE, ApiError } from '../api.ts';
import { Confirm } from './confirm.tsx';
import { ErrorBox } from './ui.tsx';

/**
 * A destructive action behind a second, explicit button: the first press asks "Revoke X?" in place
 * (a live region, so screen readers hear it) with the keyboard focus on Cancel, the safe choice;
 * the second button does it.
 */
export function ConfirmButton(props: {
  /** The button's text, e.g. "Revoke". */
  label: string;
  /** What the button acts on, for its accessible name ("Revoke token CI"). */
  target?: string;
  /** The question asked before acting. */
  question: ComponentChildren;
  /** The text of the button that does it. */
  confirm: string;
  action: () => Promise<unknown>;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const name = props.target ? `${props.label} ${props.target}` : props.label;
  // Confirm moves the focus to its safe choice (Cancel) when asked; on Cancel, or once done, it
  // returns to the first button.
  const openRef = useRef<HTMLButtonElement>(null);
  const moved = useRef(false);
  useEffect(() => {
    if (moved.current && !asking) openRef.current?.focus();
  }, [asking]);
  const ask = (on: boolean) => {
    moved.current = true;
    setAsking(on);
  };
  if (!asking) {
    return (
      <button type="button" ref={openRef} aria-label={name} onClick={() => ask(true)}>
        {props.label}
      </button>
    );
  }
  return (
    <Confirm
      stacked
      label={name}
      question={props.question}
      yes={props.confirm}
      no="Cancel"
      busy={busy}
      onYes={() => {
        setBusy(true);
        setError(null);
        props.action().then(
          () => {
            setBusy(false);
            setAsking(false);
          },
          (e: unknown) => {
            setBusy(false);
            setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
          },
        );
      }}
      onNo={() => ask(false)}
    >
      <ErrorBox error={error} />
    </Confirm>
  );
}

/** Saves bytes made in the browser (or fetched) as a file, through a temporary link. */
export function saveFile(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * A state-changing request whose answer is a file (the account export): POSTed with the header
 * the dashboard's API demands, saved under the name the answer's Content-Disposition gives.
 */
export async function postForFile(path: string, fallbackName: string): Promise<string> {
  let res: Response;
  try {
    res = await fetch(`${API_BASE}${path}`, {
      method: 'POST',
      headers: { 'X-Requested-With': 'XMLHttpRequest', Accept: 'application/zip, application/json' },
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'network', 'The cloud cannot be reached. Check the connection and try again.');
  }
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
    throw new ApiError(
      res.status,
      body.error?.code ?? `http_${res.status}`,
      body.error?.message ?? `The cloud answered ${res.status}.`,
    );
  }
  const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') ?? '')?.[1] ?? fallbackName;
  saveFile(await res.blob(), name);
  return name;
}

/**
 * A table that scrolls sideways inside its own box on a narrow screen; the box takes keyboard focus
 * (and is named), so it can be scrolled without a mouse.
 */
export function ScrollTable({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
