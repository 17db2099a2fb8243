import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.ts';
import { ConfirmButton, ScrollTable } from '../components/actions.tsx';
import { ErrorBox, Time } from '../components/ui.tsx';
import { useTitle } from '../hooks.ts';
import { useSession } from '../session.tsx';

/** A short name of the browser this page runs in ("Chrome on Linux"), for the current session. */
function thisBrowser(): string {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua)
    ? 'Edge'
    : /Firefox\//.test(ua)
      ? 'Firefox'
      : /Chrom(e|ium)\//.test(ua)
        ? 'Chrome'
        : /Safari\//.test(ua)
          ? 'Safari'
          : 'A browser';
  const os = /Android/.test(ua)
    ? 'Android'
    : /iPhone|iPad/.test(ua)
      ? 'iOS'
      : /Mac OS X/.test(ua)
        ? 'macOS'
        : /Windows/.test(ua)
          ? 'Windows'
          : /Linux/.test(ua)
            ? 'Linux'
            : 'an unknown system';
  return `${browser} on ${os}`;
}

/**
 * The account and its users; this browser's session with sign out, and sign out everywhere (every
 * session of the user ends, other browsers included). The API lists no sessions, so only this one
 * is shown.
 */
export function Account() {
  useTitle('Account');
  const { me, signOut, refresh } = useSession();
  const [error, setError] = useState<ApiError | null>(null);
  if (!me) return null;
  return (
    <>
      <h1>Account</h1>
      <section class="card" aria-labelledby="account-title">
        <h2 id="account-title">{me.name}</h2>
        <dl class="facts">
          <dt>Account id</dt>
          <dd>
            <code>{me.id}</code>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time ts={me.created_at} />
          </dd>
        </dl>
      </section>

      <section aria-labelledby="users-title">
        <h2 id="users-title">Users</h2>
        <p class="muted">
          Everyone listed signs in with a code e-mailed to their address, and gets the alarm mails.
        </p>
        <ScrollTable label="Users of the account">
          <table>
            <caption class="visually-hidden">Users of the account</caption>
            <thead>
              <tr>
                <th scope="col">E-mail</th>
                <th scope="col">Since</th>
              </tr>
            </thead>
            <tbody>
              {me.users.map((u) => (
                <tr key={u.id}>
                  <td class="break">{u.email}</td>
                  <td>
                    <Time ts={u.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      </section>

      <section aria-labelledby="sessions-title">
        <h2 id="sessions-title">Sessions</h2>
        <div class="card">
          <p>
            <strong>This browser</strong> ({thisBrowser()}) is signed in. A session lasts 30 days from its
            last use.
          </p>
          <button type="button" onClick={() => void signOut()}>
            Sign out of this browser
          </button>
        </div>
        <div class="card">
          <p>
            Lost a phone, or used a shared computer? Signing out everywhere ends every session of yours, on
            every device, this one included. API tokens keep working: revoke them under{' '}
            <a href="/app/settings/tokens">Settings → API tokens</a>.
          </p>
          <ConfirmButton
            label="Sign out everywhere"
            question={<>Sign out on every device, this one included?</>}
            confirm="Yes, sign out everywhere"
            action={async () => {
              setError(null);
              try {
                await api.post('/auth/logout-all');
              } catch (e) {
                if (!(e instanceof ApiError) || e.status !== 401) {
                  setError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
                  return;
                }
              }
              await refresh();
            }}
          />
          <ErrorBox error={error} />
        </div>
      </section>
    </>
  );
}
