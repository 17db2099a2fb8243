import { useLocation } from 'preact-iso';
import { useTitle } from '../hooks.ts';
import { NotFound } from './not-found.tsx';
import { AuditLog } from './settings/audit.tsx';
import { Bridges } from './settings/bridges.tsx';
import { Export } from './settings/export.tsx';
import { Integrations } from './settings/integrations.tsx';
import { Tokens } from './settings/tokens.tsx';
import { Webhooks } from './settings/webhooks.tsx';

/** The settings' sections, each at its own URL (`/app/settings/<slug>`); the first is the default. */
const SECTIONS = [
  { slug: 'tokens', label: 'API tokens', component: Tokens },
  { slug: 'bridges', label: 'MQTT bridges', component: Bridges },
  { slug: 'webhooks', label: 'Webhooks', component: Webhooks },
  { slug: 'integrations', label: 'Integrations', component: Integrations },
  { slug: 'audit', label: 'Audit log', component: AuditLog },
  { slug: 'export', label: 'Export', component: Export },
] as const;

/** Settings: API tokens, MQTT bridges, webhooks, integrations, the audit log and the export. */
export function Settings() {
  const { path } = useLocation();
  const slug = path.replace(/^\/app\/settings\/?/, '').split('/')[0] || 'tokens';
  const section = SECTIONS.find((s) => s.slug === slug);
  useTitle(section ? `Settings: ${section.label}` : 'Settings');
  if (!section) return <NotFound />;
  const Section = section.component;
  return (
    <>
      <h1>Settings</h1>
      <nav aria-label="Settings" class="subnav">
        <ul>
          {SECTIONS.map((s) => (
            <li key={s.slug}>
              <a href={`/app/settings/${s.slug}`} aria-current={s.slug === section.slug ? 'page' : undefined}>
                {s.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <Section />
    </>
  );
}
