import type { AnyComponent } from 'preact';
import { useEffect } from 'preact/hooks';
import { lazy, LocationProvider, Route, Router, useLocation } from 'preact-iso';
import { Loading } from './components/ui.tsx';
import { Layout } from './layout.tsx';
import { NotFound } from './pages/not-found.tsx';
import { Overview } from './pages/overview.tsx';
import { safeNext, SignIn, takePendingNext } from './pages/sign-in.tsx';
import { SessionProvider, useSession } from './session.tsx';

// Settings answers two paths (its sections are /app/settings/<section>), so it is made once.
const Settings = lazy(() => import('./pages/settings.tsx').then((m) => m.Settings));

/**
 * Every page of the dashboard by URL, so a link from a mail opens it (after sign-in). Pages other
 * than the overview load on first use, which keeps the first load small.
 */
export const PAGES: { path: string; component: AnyComponent }[] = [
  { path: '/app/', component: Overview },
  // Sensors and alarms (dash-sensors): the sensor's chart and rule, the alarm list, one event.
  { path: '/app/sensors/:id', component: lazy(() => import('./pages/sensor.tsx').then((m) => m.SensorPage)) },
  { path: '/app/alarms', component: lazy(() => import('./pages/alarms.tsx').then((m) => m.AlarmsPage)) },
  { path: '/app/events/:id', component: lazy(() => import('./pages/event.tsx').then((m) => m.EventPage)) },
  // End of sensors and alarms.
  // Sites and devices (overview, site, add device, device): the dash-sites area.
  { path: '/app/sites/new', component: lazy(() => import('./pages/site-new.tsx').then((m) => m.SiteNew)) },
  {
    path: '/app/sites/:id/devices/new',
    component: lazy(() => import('./pages/device-new.tsx').then((m) => m.DeviceNew)),
  },
  { path: '/app/sites/:id', component: lazy(() => import('./pages/site.tsx').then((m) => m.SitePage)) },
  { path: '/app/devices/:id', component: lazy(() => import('./pages/device.tsx').then((m) => m.DevicePage)) },
  // End of the sites and devices area.
  // Reports, settings and account (dash-settings).
  { path: '/app/reports', component: lazy(() => import('./pages/reports.tsx').then((m) => m.Reports)) },
  { path: '/app/settings', component: Settings },
  { path: '/app/settings/:section', component: Settings },
  { path: '/app/account', component: lazy(() => import('./pages/account.tsx').then((m) => m.Account)) },
];

function Gate() {
  const { me } = useSession();
  const { path, url, query, route } = useLocation();
  const onSignIn = path.startsWith('/app/sign-in');
  useEffect(() => {
    if (me === null && !onSignIn) route(`/app/sign-in?next=${encodeURIComponent(url)}`, true);
    // Signed in on the sign-in page: on to the page the user wanted (the sign-in form routes there
    // too; both go to the same place, whichever runs first).
    if (me && onSignIn) route(safeNext(query.next), true);
  }, [me, onSignIn, url]);
  // Signed in by the mail's link: on to the page the sign-in started from, if this browser asked.
  const signedIn = Boolean(me);
  useEffect(() => {
    if (!signedIn || onSignIn) return;
    const pending = takePendingNext(path);
    if (pending) route(pending, true);
  }, [signedIn]);
  if (onSignIn) return <SignIn />;
  if (!me) return <Loading what="Opening the dashboard" />;
  return (
    <Layout>
      <Router>
        {[
          ...PAGES.map((p) => <Route key={p.path} path={p.path} component={p.component} />),
          <Route key="404" default component={NotFound} />,
        ]}
      </Router>
    </Layout>
  );
}

export function App() {
  return (
    <LocationProvider scope="/app">
      <SessionProvider>
        <Gate />
      </SessionProvider>
    </LocationProvider>
  );
}
