import { afterAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cruise, type ICruiseOptions, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

/**
 * The import graph keeps its layers (docs/architecture.md, "Layers of the cloud"): the rules of
 * `.dependency-cruiser.mjs` hold over cloud/src, gateway/src and shared/, and they catch what they
 * are meant to catch in a small tree made for it.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

interface DepcruiseConfig {
  forbidden: IForbiddenRuleType[];
  options: ICruiseOptions;
}

async function loadConfig(): Promise<DepcruiseConfig> {
  const module = (await import(pathToFileURL(path.join(ROOT, '.dependency-cruiser.mjs')).href)) as {
    default: DepcruiseConfig;
  };
  return module.default;
}

/** Every violation as one line: `rule: from → to` (a cycle lists its path). */
async function violations(baseDir: string, roots: string[], tsConfigFile?: string): Promise<string[]> {
  const config = await loadConfig();
  const options: ICruiseOptions = {
    ...config.options,
    baseDir,
    validate: true,
    ruleSet: { forbidden: config.forbidden },
  };
  if (!tsConfigFile) delete options.tsConfig;
  const result = await cruise(
    roots,
    options,
    undefined,
    tsConfigFile ? { tsConfig: extractTSConfig(path.join(baseDir, tsConfigFile)) } : undefined,
  );
  const output = result.output as ICruiseResult;
  return output.summary.violations.map((v) => {
    const cycle = v.cycle ? ` (cycle: ${[v.from, ...v.cycle.map((c) => c.name)].join(' → ')})` : '';
    return `${v.rule.name}: ${v.from} → ${v.to}${cycle}`;
  });
}

describe('the import graph', () => {
  it('has no import against the layers and no cycle in cloud/src, gateway/src and shared/', async () => {
    const found = await violations(ROOT, ['cloud/src', 'gateway/src', 'shared'], 'tsconfig.json');
    expect(found).toEqual([]);
  }, 60_000);

  describe('in a tree made to test the rules', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'import-graph-'));
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
    const write = (files: Record<string, string>) => {
      fs.rmSync(path.join(dir, 'cloud'), { recursive: true, force: true });
      fs.rmSync(path.join(dir, 'shared'), { recursive: true, force: true });
      fs.rmSync(path.join(dir, 'gateway'), { recursive: true, force: true });
      for (const [name, text] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
        fs.writeFileSync(path.join(dir, name), text);
      }
    };
    const source = (...lines: string[]) => `${lines.join('\n')}\n`;
    /** A new resource folder laid out the way CONTRIBUTING.md says, mounted by the composition root. */
    const resource: Record<string, string> = {
      'shared/time.ts': source('export const second = 1;'),
      'gateway/src/main.ts': source(
        `import { second } from '../../shared/time.ts';`,
        'export const t = second;',
      ),
      'cloud/src/errors.ts': source('export class NotFound extends Error {}'),
      'cloud/src/storage/keyset.ts': source('export interface PageRequest { limit: number }'),
      'cloud/src/http/route-table.ts': source(
        `import { NotFound } from '../errors.ts';`,
        'export interface RouteDef { path: string }',
        'export const notFound = NotFound;',
      ),
      'cloud/src/reports/reports.repository.ts': source(
        `import type { PageRequest } from '../storage/keyset.ts';`,
        'export class ReportsRepository { list(_p: PageRequest) { return []; } }',
      ),
      'cloud/src/reports/reports.service.ts': source(
        `import { second } from '../../../shared/time.ts';`,
        `import type { ReportsRepository } from './reports.repository.ts';`,
        'export class ReportsService { constructor(readonly repository: ReportsRepository) {} at = second; }',
      ),
      'cloud/src/reports/reports.routes.ts': source(
        `import type { RouteDef } from '../http/route-table.ts';`,
        `import type { ReportsService } from './reports.service.ts';`,
        'export interface ReportRoutesDeps { reports: ReportsService }',
        'export function reportRoutes(_s: ReportRoutesDeps): RouteDef[] { return []; }',
      ),
      'cloud/src/services.ts': source(
        `import { ReportsRepository } from './reports/reports.repository.ts';`,
        `import { ReportsService } from './reports/reports.service.ts';`,
        'export const services = { reports: new ReportsService(new ReportsRepository()) };',
      ),
      'cloud/src/routes.ts': source(
        `import { reportRoutes } from './reports/reports.routes.ts';`,
        `import { services } from './services.ts';`,
        'export const routes = reportRoutes(services);',
      ),
    };
    const roots = ['cloud/src', 'gateway/src', 'shared'];

    it('passes a new resource folder without any change to the rules', async () => {
      write(resource);
      expect(await violations(dir, roots)).toEqual([]);
    }, 30_000);

    it('refuses the HTTP edge reaching up into a resource, and a resource importing the root', async () => {
      write({
        ...resource,
        'cloud/src/http/route-table.ts': source(
          `import type { ReportsService } from '../reports/reports.service.ts';`,
          'export interface RouteDef { path: string; s?: ReportsService }',
        ),
        'cloud/src/reports/reports.routes.ts': source(
          `import type { RouteDef } from '../http/route-table.ts';`,
          `import type { services } from '../services.ts';`,
          'export function reportRoutes(_s: typeof services): RouteDef[] { return []; }',
        ),
      });
      expect((await violations(dir, roots)).sort()).toEqual([
        'http-edge-not-up: cloud/src/http/route-table.ts → cloud/src/reports/reports.service.ts',
        'resources-not-root: cloud/src/reports/reports.routes.ts → cloud/src/services.ts',
      ]);
    }, 30_000);

    it('refuses a repository on the HTTP edge, a service on routes, shared/ or the gateway on the cloud', async () => {
      write({
        ...resource,
        'cloud/src/reports/reports.repository.ts': source(
          `import type { RouteDef } from '../http/route-table.ts';`,
          'export class ReportsRepository { r?: RouteDef }',
        ),
        'cloud/src/reports/reports.service.ts': source(
          `import type { reportRoutes } from './reports.routes.ts';`,
          `import type { ReportsRepository } from './reports.repository.ts';`,
          'export class ReportsService {',
          '  constructor(readonly repository: ReportsRepository, readonly r?: typeof reportRoutes) {}',
          '}',
        ),
        'shared/time.ts': source(
          `import type { NotFound } from '../cloud/src/errors.ts';`,
          'export type E = NotFound;',
          'export const second = 1;',
        ),
        'gateway/src/main.ts': source(
          `import { NotFound } from '../../cloud/src/errors.ts';`,
          'export const e = NotFound;',
        ),
      });
      const routes = 'cloud/src/reports/reports.routes.ts';
      const service = 'cloud/src/reports/reports.service.ts';
      expect((await violations(dir, roots)).sort()).toEqual([
        'gateway-not-cloud: gateway/src/main.ts → cloud/src/errors.ts',
        `no-circular: ${routes} → ${service} (cycle: ${routes} → ${service} → ${routes})`,
        'repositories-below-services: cloud/src/reports/reports.repository.ts → cloud/src/http/route-table.ts',
        `routes-only-from-root: ${service} → ${routes}`,
        `services-not-routes: ${service} → ${routes}`,
        'shared-imports-libraries-only: shared/time.ts → cloud/src/errors.ts',
      ]);
    }, 30_000);

    it('refuses a cycle, also one made of type-only imports', async () => {
      write({
        ...resource,
        'cloud/src/reports/report-a.ts': source(
          `import type { B } from './report-b.ts';`,
          'export interface A { b: B }',
        ),
        'cloud/src/reports/report-b.ts': source(
          `import type { A } from './report-a.ts';`,
          'export interface B { a?: A }',
        ),
      });
      const [a, b] = ['cloud/src/reports/report-a.ts', 'cloud/src/reports/report-b.ts'];
      expect(await violations(dir, roots)).toEqual([`no-circular: ${a} → ${b} (cycle: ${a} → ${b} → ${a})`]);
    }, 30_000);
  });
});
