import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { SensorsRepository } from '../sensors/sensors.repository.ts';
import type { Db } from '../storage/database.ts';
import { SilencesService } from './silences.service.ts';

/** Silence windows: their slice of the services. */
export function buildSilences(deps: {
  db: Db;
  clock: Clock;
  audit: AuditRepository;
  sensorsRepository: SensorsRepository;
  rules: RuleEngine;
}): { silences: SilencesService } {
  const { db, clock, audit, sensorsRepository, rules } = deps;
  return { silences: new SilencesService({ db, clock, sensors: sensorsRepository, audit, engine: rules }) };
}
