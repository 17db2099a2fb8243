import { useEffect, useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, ApiError } from '../api.ts';
import { ErrorBox, Field } from '../components/ui.tsx';
import { useTitle } from '../hooks.ts';
import { useSession } from '../session.tsx';

/** Where to go after signing in: a page of the dashboard only (never another site). */
export function safeNext(next: string | undefined | null): string {
  return next && next.startsWith('/app/') && !next.startsWith('/app/sign-in') ? next : '/app/';
}

/** Where a sign-in started from this browser was headed, for the mail's link (kept 15 minutes). */
const PENDING_NEXT = 'sm-sign-in-next';
const PENDING_NEXT_MS = 15 * 60 * 1000;

/**
 * The mail's link opens `/app/auth/callback`, which signs in and lands on `/app/`: the page the user
 * wanted is remembered in this browser when the code is requested, and taken on the first page
 * opened signed in (the mail says to open the link in the same browser).
 */
function rememberNext(next: string): void {
  try {
    if (next === '/app/') localStorage.removeItem(PENDING_NEXT);
    else localStorage.setItem(PENDING_NEXT, JSON.stringify({ next, at: Date.now() }));
  } catch {
    // Storage refused (private mode, full): the link lands on the overview.
  }
}

/** The remembered page, once, if it is recent and the browser is on the overview; null otherwise. */
export function takePendingNext(path: string): string | null {
  try {
    const raw = localStorage.getItem(PENDING_NEXT);
    if (raw === null) return null;
    localStorage.removeItem(PENDING_NEXT);
    const { next, at } = JSON.parse(raw) as { next?: string; at?: number };
    const onOverview = path === '/app' || path === '/app/';
    if (!onOverview || typeof at !== 'number' || Date.now() - at > PENDING_NEXT_MS) return null;
    const safe = safeNext(next);
    return safe === '/app/' ? null : safe;
  } catch {
    return null;
  }
}

/**
 * Sign in by e-mail: the address, then the code from the mail (`ABC-DEF`, with or without the
 * hyphen, any case). The mail's link signs in directly (`/app/auth/callback`), so this form is for
 * reading the code on another device.
 */
export function SignIn() {
  useTitle('Sign in');
  const { query, route } = useLocation();
  const { refresh } = useSession();
  const [email, setEmail] = useState(query.email ?? '');
  const [sent, setSent] = useState(query.step === 'code');
  const [code, setCode] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const next = safeNext(query.next);
  // The address form is gone once the code is sent: the keyboard's focus moves on to the code.
  const codeInput = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (sent) codeInput.current?.focus();
  }, [sent]);

  const requestCode = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/auth/request', { email: email.trim() });
      rememberNext(next);
      setSent(true);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };

  const verify = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/auth/verify', { email: email.trim(), code: code.trim() });
      rememberNext('/app/');
      await refresh();
      route(next, true);
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };

  const codeMessage =
    error?.code === 'code_invalid'
      ? 'That code is wrong, expired or used already. Open the link in the latest mail instead, or ask for a new code.'
      : null;

  return (
    <main id="main" class="sign-in">
      <h1>Sign in</h1>
      {query.link === 'invalid' && !sent && (
        <p class="error-box" role="alert">
          That sign-in link is expired or was used already. Ask for a new code below.
        </p>
      )}
      {!sent ? (
        <form onSubmit={(e) => void requestCode(e)} noValidate>
          <p>We e-mail you a sign-in code and a link. No password needed.</p>
          <Field id="email" label="E-mail address" error={error?.fieldMessage('email') ?? null}>
            <input
              id="email"
              type="email"
              autocomplete="email"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </Field>
          {error && !error.fieldMessage('email') && <ErrorBox error={error} />}
          <button type="submit" class="primary" disabled={busy || !email.trim()}>
            Send me a code
          </button>
        </form>
      ) : (
        <form onSubmit={(e) => void verify(e)} noValidate>
          <p role="status">
            Check your mail: we sent a code to <strong>{email}</strong>. It works for 10 minutes. Open the
            link in the mail, or type the code here.
          </p>
          <Field id="code" label="Code" error={codeMessage} hint="Six characters, like ABC-DEF">
            <input
              id="code"
              ref={codeInput}
              autocomplete="one-time-code"
              autocapitalize="characters"
              spellcheck={false}
              required
              value={code}
              onInput={(e) => setCode(e.currentTarget.value)}
            />
          </Field>
          {error && !codeMessage && <ErrorBox error={error} />}
          <button type="submit" class="primary" disabled={busy || !code.trim()}>
            Sign in
          </button>{' '}
          <button
            type="button"
            onClick={() => {
              setSent(false);
              setCode('');
              setError(null);
            }}
          >
            Use another address or send a new code
          </button>
        </form>
      )}
    </main>
  );
}
