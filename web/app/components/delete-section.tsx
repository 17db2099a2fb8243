import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import { Confirm } from './confirm.tsx';
import { ErrorBox } from './ui.tsx';

/**
 * A page's "danger zone": what deleting does, a button, and the Confirm step. `remove` deletes and
 * leaves the page; when it throws, its error shows above the buttons and the question stays open,
 * unless `closeOnError` (the site page's refusal, devices remaining, needs other action first).
 */
export function DeleteSection(props: {
  /** The heading's id, naming the section. */
  id: string;
  title: string;
  children: ComponentChildren;
  button: string;
  question: string;
  yes: string;
  remove: () => Promise<void>;
  closeOnError?: boolean;
}) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const remove = async () => {
    setBusy(true);
    setError(null);
    try {
      await props.remove();
    } catch (err) {
      setError(err as ApiError);
      if (props.closeOnError) setConfirming(false);
      setBusy(false);
    }
  };
  return (
    <section class="card danger-zone" aria-labelledby={props.id}>
      <h2 id={props.id}>{props.title}</h2>
      {props.children}
      <ErrorBox error={error} />
      {confirming ? (
        <Confirm
          question={props.question}
          yes={props.yes}
          busy={busy}
          onYes={() => void remove()}
          onNo={() => setConfirming(false)}
        />
      ) : (
        <button type="button" class="danger" onClick={() => setConfirming(true)}>
          {props.button}
        </button>
      )}
    </section>
  );
}
