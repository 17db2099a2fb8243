import type { AuditRepository } from '../audit/audit.repository.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { RuleEngine } from '../rules/rule-engine.ts';
import type { Db } from '../storage/database.ts';
import { SensorsRepository } from './sensors.repository.ts';
import { SensorsService } from './sensors.service.ts';

/** Sensors (channels) and their rules: their slice of the services. */
export function buildSensors(deps: {
  db: Db;
  clock: Clock;
  log: Logger;
  audit: AuditRepository;
  rules: RuleEngine;
}): {
  sensorsRepository: SensorsRepository;
  sensors: SensorsService;
} {
  const { db, clock, audit, rules } = deps;
  const sensorsRepository = new SensorsRepository();
  const sensors = new SensorsService({
    db,
    clock,
    sensors: sensorsRepository,
    audit,
    ruleChanges: rules,
    settle: (seqs) => rules.settle(seqs),
    log: deps.log.child({ module: 'sensors' }),
  });
  return { sensorsRepository, sensors };
}
