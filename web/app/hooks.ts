import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/**
 * A number that grows with every call: orders a page's reads and the live objects that arrive
 * (a live copy that came after a read began is at least as new as what that read answers).
 */
let counter = 0;
export function stamp(): number {
  return ++counter;
}

export interface Loaded<T> {
  data: T | undefined;
  /** The `stamp()` of when the read that answered `data` began (0 before any answer). */
  loadedAt: number;
  error: ApiError | null;
  loading: boolean;
  /** Loads again (after a change); the old data stays on screen until the new arrives. */
  reload: () => void;
}

/** Runs `load` when `deps` change, keeping the latest answer; a stale answer never wins a race. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [answer, setAnswer] = useState<{ data: T | undefined; loadedAt: number }>({
    data: undefined,
    loadedAt: 0,
  });
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const generation = useRef(0);
  useEffect(() => {
    const mine = ++generation.current;
    const startedAt = stamp();
    setLoading(true);
    load().then(
      (value) => {
        if (mine !== generation.current) return;
        setAnswer({ data: value, loadedAt: startedAt });
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (mine !== generation.current) return;
        setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
        setLoading(false);
      },
    );
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data: answer.data, loadedAt: answer.loadedAt, error, loading, reload };
}

/** Sets the document title for the page shown, so history and screen readers name it. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Sensor monitoring`;
  }, [title]);
}

export interface Submit {
  busy: boolean;
  /** The last attempt's error (its field messages show beside the fields); cleared on each attempt. */
  error: ApiError | null;
  submit: (e: Event) => Promise<void>;
}

/**
 * A form's submit handler: keeps the browser from loading a page, marks the form busy while `work`
 * runs and keeps the error it throws.
 */
export function useSubmit(work: () => Promise<void>): Submit {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit };
}
