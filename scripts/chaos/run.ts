import fs from 'node:fs';
import path from 'node:path';
import type { DbKind } from '../../test/helpers/databases.ts';
import { ROOT } from '../../test/helpers/process.ts';
import { cloudKill } from './cloud-kill.ts';
import { gatewayKill } from './gateway-kill.ts';
import { network, outage72h } from './network.ts';
import { overload } from './overload.ts';
import { pgOutage } from './pg-outage.ts';
import type { Scenario, ScenarioOptions, ScenarioResult } from './types.ts';

/** Every scenario `npm run chaos` knows, in the order it runs them. */
export const SCENARIOS: Scenario[] = [gatewayKill, cloudKill, pgOutage, overload, network, outage72h];

export function scenarioNamed(name: string): Scenario {
  const found = SCENARIOS.find((s) => s.name === name);
  if (!found) throw new Error(`no scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  return found;
}

/** A result passes when nothing acknowledged is lost, nothing is stored twice or unsent, and no 5xx. */
export function failures(r: ScenarioResult): string[] {
  const out: string[] = [];
  if (r.lost) out.push(`${r.lost} lost`);
  if (r.duplicated) out.push(`${r.duplicated} duplicated`);
  if (r.unexpected) out.push(`${r.unexpected} unexpected`);
  if (r.http5xx) out.push(`${r.http5xx} 5xx`);
  if (typeof r.notes.refused === 'number' && r.notes.refused > 0) out.push(`${r.notes.refused} refused`);
  if (typeof r.notes.failed === 'string') out.push(r.notes.failed);
  return out;
}

export async function runScenarios(
  scenarios: Scenario[],
  dbs: DbKind[],
  options: Omit<ScenarioOptions, 'db'>,
): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const scenario of scenarios) {
    for (const db of dbs) {
      if (scenario.databases && !scenario.databases.includes(db)) continue;
      options.log(`${scenario.name} on ${db}: ${scenario.description}`);
      const r = await scenario.run({ ...options, db });
      options.log(`${scenario.name} on ${db}: ${failures(r).join(', ') || 'passed'}`);
      results.push(r);
    }
  }
  return results;
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/** The table of docs/reliability.md, as Markdown. */
export function formatTable(results: ScenarioResult[]): string {
  const head = [
    'scenario',
    'db',
    'faults',
    'sent',
    'acknowledged',
    'stored',
    'lost',
    'duplicated',
    'unexpected',
    '5xx',
    'recovery (max)',
    'run',
  ];
  const rows = results.map((r) => [
    r.scenario,
    r.db,
    String(r.faults),
    String(r.sent),
    String(r.acknowledged),
    String(r.stored),
    String(r.lost),
    String(r.duplicated),
    String(r.unexpected),
    String(r.http5xx),
    `${seconds(r.recoveryMs)} s`,
    `${seconds(r.durationMs)} s`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i < 2 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}

/** Writes the results as JSON under chaos-results/ (git-ignored); answers the file's path. */
export function writeResults(results: ScenarioResult[], meta: Record<string, unknown>): string {
  const dir = path.join(ROOT, 'chaos-results');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify({ ...meta, results }, null, 2)}\n`);
  return file;
}
