import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { SCENARIOS } from '../../scripts/chaos/run.ts';
import { check } from '../../scripts/chaos/checker.ts';
import { readingKey } from '../../scripts/chaos/types.ts';

describe('the chaos checker', () => {
  const a = readingKey('dev-1', 'temperature', 1_000_000);
  const b = readingKey('dev-1', 'temperature', 2_000_000);
  const c = readingKey('dev-2', 'humidity', 1_000_000);

  it('finds nothing wrong when every acknowledged reading is stored once', () => {
    const r = check(
      [
        { key: a, acknowledged: true },
        { key: b, acknowledged: true },
      ],
      [a, b],
    );
    expect(r).toEqual({ acknowledged: 2, stored: 2, lost: [], duplicated: [], unexpected: [] });
  });

  it('counts an acknowledged reading the cloud does not have as lost', () => {
    expect(check([{ key: a, acknowledged: true }], []).lost).toEqual([a]);
  });

  it('does not count an unacknowledged reading as lost, stored or not', () => {
    expect(check([{ key: a, acknowledged: false }], [])).toMatchObject({ lost: [], unexpected: [] });
    expect(check([{ key: a, acknowledged: false }], [a])).toMatchObject({ lost: [], unexpected: [] });
  });

  it('counts a reading acknowledged on any of its retries as acknowledged', () => {
    const r = check(
      [
        { key: a, acknowledged: false },
        { key: a, acknowledged: true },
      ],
      [],
    );
    expect(r).toMatchObject({ acknowledged: 1, lost: [a] });
  });

  it('counts a reading stored twice as duplicated and one never sent as unexpected', () => {
    const r = check([{ key: a, acknowledged: true }], [a, a, c]);
    expect(r).toMatchObject({ stored: 3, duplicated: [a], unexpected: [c], lost: [] });
  });
});

describe('the short form in CI', () => {
  it('runs every chaos scenario in one of the test files', () => {
    const dir = path.dirname(fileURLToPath(import.meta.url));
    const named = fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.test.ts'))
      .flatMap((f) => {
        const call = /describeScenarios\(\[([^\]]*)\]\)/.exec(fs.readFileSync(path.join(dir, f), 'utf8'));
        return call ? [...call[1]!.matchAll(/'([a-z0-9-]+)'/g)].map((m) => m[1]) : [];
      });
    expect(named.sort()).toEqual(SCENARIOS.map((s) => s.name).sort());
  });
});
