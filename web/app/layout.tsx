import type { ComponentChildren } from 'preact';
import { useLocation } from 'preact-iso';
import { useSession } from './session.tsx';

const NAV = [
  {
    href: '/app/',
    label: 'Overview',
    // preact-iso drops the trailing slash: the overview's path is `/app`.
    match: (p: string) =>
      p === '/app' || p === '/app/' || p.startsWith('/app/sites') || p.startsWith('/app/devices'),
  },
  {
    href: '/app/alarms',
    label: 'Alarms',
    match: (p: string) => p.startsWith('/app/alarms') || p.startsWith('/app/events'),
  },
  { href: '/app/reports', label: 'Reports', match: (p: string) => p.startsWith('/app/reports') },
  { href: '/app/settings', label: 'Settings', match: (p: string) => p.startsWith('/app/settings') },
  { href: '/app/account', label: 'Account', match: (p: string) => p.startsWith('/app/account') },
];

/** The frame of every signed-in page: a skip link, the navigation, and the page in `<main>`. */
export function Layout({ children }: { children: ComponentChildren }) {
  const { path } = useLocation();
  const { me, signOut, signOutError } = useSession();
  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/app/">
          Sensor monitoring
        </a>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.href}>
                <a href={n.href} aria-current={n.match(path) ? 'page' : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span class="muted">{me?.name}</span>
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {signOutError && (
          <div class="error-box sign-out-failed" role="alert">
            <p>
              Signing out failed: {signOutError.message} You are still signed in on this browser; on a shared
              computer, try again before you leave.
            </p>
            <button type="button" onClick={() => void signOut()}>
              Try signing out again
            </button>
          </div>
        )}
        {children}
      </main>
    </>
  );
}
