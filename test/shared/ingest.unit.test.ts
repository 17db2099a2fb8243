import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { IngestBodySchema, IngestValidationError, validateIngestBody } from '../../shared/ingest.ts';
import { MEASUREMENT_KINDS } from '../../shared/kinds.ts';

const NOW = Date.UTC(2026, 0, 5) * 1000;

const measurement = fc.record(
  {
    type: fc.oneof(fc.constantFrom(...MEASUREMENT_KINDS), fc.string()),
    value: fc.oneof(
      fc.integer({ min: -200, max: 2000 }),
      fc.double({ noNaN: true, min: -1e5, max: 1e5 }),
      fc.string(),
    ),
    label: fc.oneof(fc.string({ maxLength: 70 }), fc.integer()),
    unit: fc.constantFrom('V', '%', '°F'),
  },
  { requiredKeys: [] },
);

describe('the ingest body validator', () => {
  it('accepts exactly the bodies the wire schema accepts, apart from the sanity ranges it adds', () => {
    fc.assert(
      fc.property(fc.array(measurement, { maxLength: 34 }), (measurements) => {
        const body = { device: 'probe', measurements };
        let validatorOk = true;
        try {
          validateIngestBody(body, { nowMicros: NOW });
        } catch (err) {
          if (!(err instanceof IngestValidationError)) throw err;
          if (err.code === 'out_of_range') return; // the schema knows no sanity ranges
          validatorOk = false;
        }
        expect(validatorOk).toBe(IngestBodySchema.safeParse(body).success);
      }),
      { numRuns: 2000 },
    );
  });

  it('names the first failing measurement and its own code for each failure', () => {
    const fail = (body: unknown) => {
      try {
        validateIngestBody(body, { nowMicros: NOW });
      } catch (err) {
        return err instanceof IngestValidationError ? [err.status, err.code, err.path] : err;
      }
      return 'accepted';
    };
    expect(fail({ device: 'd', measurements: [] })).toEqual([400, 'no_measurements', 'measurements']);
    expect(fail({ device: 'd', measurements: [{ type: 'x', value: 1 }, { type: 'temperature' }] })).toEqual([
      422,
      'unknown_kind',
      'measurements[0].type',
    ]);
    expect(
      fail({ device: 'd', measurements: [{ type: 'temperature', value: 1 }, { type: 'temperature' }] }),
    ).toEqual([400, 'invalid_measurement', 'measurements[1]']);
    expect(fail({ device: 'd', measurements: [{ type: 'leak', value: 1 }] })).toBe('accepted');
  });
});
