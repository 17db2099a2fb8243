import { describe, expect, it } from '@jest/globals';
import { VERTICALS as CLOUD_VERTICALS } from '../../cloud/src/sites/verticals.ts';
import { sensorName, VERTICALS } from '../../web/app/site-helpers.ts';

describe('the site pages helpers', () => {
  it('offer exactly the verticals the cloud accepts, in its order', () => {
    expect(VERTICALS.map((v) => v.value)).toEqual([...CLOUD_VERTICALS]);
  });

  it('name a sensor by its label, else by its kind, and a numbered channel by both', () => {
    expect(sensorName({ label: 'door', kind: 'temperature' })).toBe('door');
    expect(sensorName({ label: '', kind: 'temperature' })).toBe('Temperature');
    // A channel's index alone says nothing: the kind comes first.
    expect(sensorName({ label: '2', kind: 'humidity' })).toBe('Humidity 2');
    expect(sensorName({ label: '', kind: 'co2' })).toBe('CO₂');
  });
});
