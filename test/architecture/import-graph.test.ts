import { afterAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cruise, type ICruiseOptions, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

/**
 * The import graph keeps its layers (docs/architecture.md, "Layers"): the rules of
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
    /** A new resource folder laid out the way CONTRIBUTING.md says, mounted by the composition root. */
    const resource: Record<string, string> = {
      'shared/time.ts': `export const second = 1;\n`,
      'cloud/src/errors.ts': `export class NotFound extends Error {}\n`,
      'cloud/src/storage/keyset.ts': `export interface PageRequest { limit: number }\n`,
      'cloud/src/http/route-table.ts': `import { NotFound } from '../errors.ts';\nexport interface RouteDef { path: string }\nexport const notFound = NotFound;\n`,
      'cloud/src/reports/reports.repository.ts': `import type { PageRequest } from '../storage/keyset.ts';\nexport class ReportsRepository { list(_p: PageRequest) { return []; } }\n`,
      'cloud/src/reports/reports.service.ts': `import { second } from '../../../shared/time.ts';\nimport type { ReportsRepository } from './reports.repository.ts';\nexport class ReportsService { constructor(readonly repository: ReportsRepository) {} at = second; }\n`,
      'cloud/src/reports/reports.routes.ts': `import type { RouteDef } from '../http/route-table.ts';\nimport type { ReportsService } from './reports.service.ts';\nexport interface ReportRoutesDeps { reports: ReportsService }\nexport function reportRoutes(_s: ReportRoutesDeps): RouteDef[] { return []; }\n`,
      'cloud/src/services.ts': `import { ReportsRepository } from './reports/reports.repository.ts';\nimport { ReportsService } from './reports/reports.service.ts';\nexport const services = { reports: new ReportsService(new ReportsRepository()) };\n`,
      'cloud/src/routes.ts': `import { reportRoutes } from './reports/reports.routes.ts';\nimport { services } from './services.ts';\nexport const routes = reportRoutes(services);\n`,
    };
    const roots = ['cloud/src', 'shared'];

    it('passes a new resource folder without any change to the rules', async () => {
      write(resource);
      expect(await violations(dir, roots)).toEqual([]);
    }, 30_000);

    it('refuses the HTTP edge reaching up into a resource, and a resource importing the root', async () => {
      write({
        ...resource,
        'cloud/src/http/route-table.ts': `import type { ReportsService } from '../reports/reports.service.ts';\nexport interface RouteDef { path: string; s?: ReportsService }\n`,
        'cloud/src/reports/reports.routes.ts': `import type { RouteDef } from '../http/route-table.ts';\nimport type { services } from '../services.ts';\nexport function reportRoutes(_s: typeof services): RouteDef[] { return []; }\n`,
      });
      expect((await violations(dir, roots)).sort()).toEqual([
        'http-edge-not-up: cloud/src/http/route-table.ts → cloud/src/reports/reports.service.ts',
        'resources-not-root: cloud/src/reports/reports.routes.ts → cloud/src/services.ts',
      ]);
    }, 30_000);

    it('refuses a repository importing the HTTP edge, a routes file imported outside the root, and shared/ importing the cloud', async () => {
      write({
        ...resource,
        'cloud/src/reports/reports.repository.ts': `import type { RouteDef } from '../http/route-table.ts';\nexport class ReportsRepository { r?: RouteDef }\n`,
        'cloud/src/reports/reports.service.ts': `import type { reportRoutes } from './reports.routes.ts';\nimport type { ReportsRepository } from './reports.repository.ts';\nexport class ReportsService { constructor(readonly repository: ReportsRepository, readonly r?: typeof reportRoutes) {} }\n`,
        'shared/time.ts': `import type { NotFound } from '../cloud/src/errors.ts';\nexport type E = NotFound;\n`,
      });
      expect((await violations(dir, roots)).sort()).toEqual([
        'no-circular: cloud/src/reports/reports.routes.ts → cloud/src/reports/reports.service.ts (cycle: cloud/src/reports/reports.routes.ts → cloud/src/reports/reports.service.ts → cloud/src/reports/reports.routes.ts)',
        'repositories-below-services: cloud/src/reports/reports.repository.ts → cloud/src/http/route-table.ts',
        'routes-only-from-root: cloud/src/reports/reports.service.ts → cloud/src/reports/reports.routes.ts',
        'services-not-routes: cloud/src/reports/reports.service.ts → cloud/src/reports/reports.routes.ts',
        'shared-imports-libraries-only: shared/time.ts → cloud/src/errors.ts',
      ]);
    }, 30_000);

    it('refuses a cycle, also one made of type-only imports', async () => {
      write({
        ...resource,
        'cloud/src/reports/report-a.ts': `import type { B } from './report-b.ts';\nexport interface A { b: B }\n`,
        'cloud/src/reports/report-b.ts': `import type { A } from './report-a.ts';\nexport interface B { a?: A }\n`,
      });
      expect(await violations(dir, roots)).toEqual([
        'no-circular: cloud/src/reports/report-a.ts → cloud/src/reports/report-b.ts (cycle: cloud/src/reports/report-a.ts → cloud/src/reports/report-b.ts → cloud/src/reports/report-a.ts)',
      ]);
    }, 30_000);
  });
});
