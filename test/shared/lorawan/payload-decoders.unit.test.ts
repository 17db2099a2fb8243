import { describe, expect, it } from '@jest/globals';
import { measurementsFromObject } from '../../../shared/lorawan/decoded-object.ts';
import {
  decodeCayenneLpp,
  decodeDraginoLht65,
  decodeElsys,
  decodePayload,
  decoderForModel,
} from '../../../shared/lorawan/payload-decoders.ts';

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ''), 'hex');

/** The measurements of a decoded object, as `type/label=value unit` lines (easy to read in a diff). */
function lines(object: Record<string, unknown> | null): string[] {
  const { measurements } = measurementsFromObject(object ?? {});
  return measurements.map((m) => `${m.kind}/${m.label ?? '-'}=${m.value} ${m.unit}`);
}

describe("the fields of a network server's decoded object", () => {
  it('reads numbers a codec wrote as text, and reports other values of known fields as dropped', () => {
    const mapped = measurementsFromObject({
      temperature: '21.5',
      humidity: ' 48 ',
      battery: 'low',
      co2: null,
      temperatureSensor: { '3': '-4.1', '4': 'n/a' },
    });
    expect(mapped.measurements.map((m) => `${m.kind}/${m.label ?? '-'}=${m.value}`)).toEqual([
      'temperature/-=21.5',
      'humidity/-=48',
      'temperature/3=-4.1',
    ]);
    expect(mapped.dropped).toEqual([
      'battery: not a number ("low")',
      'temperatureSensor.4: not a number ("n/a")',
    ]);
  });
});

describe('Cayenne LPP, against the vectors of the LPP reference', () => {
  it('reads two temperature sensors: 03 67 01 10 05 67 00 FF is 27.2 °C on channel 3 and 25.5 °C on channel 5', () => {
    const object = decodeCayenneLpp(hex('03 67 01 10 05 67 00 FF'));
    expect(object).toEqual({ temperatureSensor: { '3': 27.2, '5': 25.5 } });
    expect(lines(object)).toEqual(['temperature/3=27.2 °C', 'temperature/5=25.5 °C']);
  });

  it('reads a negative temperature: 01 67 FF D7 is -4.1 °C on channel 1', () => {
    expect(decodeCayenneLpp(hex('01 67 FF D7'))).toEqual({ temperatureSensor: { '1': -4.1 } });
  });

  it('reads an accelerometer: 06 71 04 D2 FB 2E 00 00 is x 1.234 G, y -1.234 G, z 0 on channel 6', () => {
    expect(decodeCayenneLpp(hex('06 71 04 D2 FB 2E 00 00'))).toEqual({
      accelerometer: { '6': { x: 1.234, y: -1.234, z: 0 } },
    });
  });

  it('reads a GPS position: 01 88 06 76 5F F2 96 0A 00 03 E8 is 42.3519 N, 87.9094 W, 10 m', () => {
    expect(decodeCayenneLpp(hex('01 88 06 76 5F F2 96 0A 00 03 E8'))).toEqual({
      gpsLocation: { '1': { latitude: 42.3519, longitude: -87.9094, altitude: 10 } },
    });
  });

  it('reads every type of the reference, and maps those of our kinds to measurements', () => {
    const bytes = hex(
      [
        '01 00 01', // digital input 1
        '02 01 00', // digital output 0
        '03 02 FF 38', // analog input -2.00
        '04 03 01 2C', // analog output 3.00
        '05 65 01 F4', // illuminance 500 lux
        '06 66 01', // presence 1
        '07 67 00 E1', // temperature 22.5 °C
        '08 68 61', // humidity 48.5 %
        '09 73 27 7F', // barometer 1011.1 hPa
        '0A 86 00 64 FF 9C 00 00', // gyrometer 1, -1, 0 °/s
      ].join(''),
    );
    const object = decodeCayenneLpp(bytes);
    expect(object).toEqual({
      digitalInput: { '1': 1 },
      digitalOutput: { '2': 0 },
      analogInput: { '3': -2 },
      analogOutput: { '4': 3 },
      illuminanceSensor: { '5': 500 },
      presenceSensor: { '6': 1 },
      temperatureSensor: { '7': 22.5 },
      humiditySensor: { '8': 48.5 },
      barometer: { '9': 1011.1 },
      gyrometer: { '10': { x: 1, y: -1, z: 0 } },
    });
    expect(lines(object)).toEqual(['temperature/7=22.5 °C', 'humidity/8=48.5 %', 'pressure/9=1011.1 hPa']);
    expect(measurementsFromObject(object).unknown).toEqual([]);
  });

  it('reads the extended types of our kinds, against the CayenneLPP library vectors, with channels as labels', () => {
    // voltage 03 74 57 B8 = 224.56 V, current 01 75 00 ED = 0.237 A, power 05 80 0D 7A = 3450 W;
    // concentration 02 7D 03 0C = 780 ppm (2 bytes, 1 ppm, unsigned)
    const object = decodeCayenneLpp(hex('03 74 57 B8 01 75 00 ED 05 80 0D 7A 02 7D 03 0C'));
    expect(object).toEqual({
      voltage: { '3': 224.56 },
      current: { '1': 0.237 },
      power: { '5': 3450 },
      co2: { '2': 780 },
    });
    expect(lines(object)).toEqual([
      'voltage/3=224.56 V',
      'current/1=0.237 A',
      'power/5=3450 W',
      'co2/2=780 ppm',
    ]);
  });

  it('decodes past the other extended types: frequency 01 76 33 BE 27 A0 is 868100000 Hz', () => {
    const object = decodeCayenneLpp(hex('01 76 33 BE 27 A0 05 79 FF EF 03 67 01 10'));
    expect(object).toEqual({
      frequency: { '1': 868100000 },
      altitude: { '5': -17 },
      temperatureSensor: { '3': 27.2 },
    });
    expect(lines(object)).toEqual(['temperature/3=27.2 °C']);
    expect(measurementsFromObject(object).unknown).toEqual([]);
    // Colour (0x87, three bytes of red, green and blue) is passed too.
    const coloured = decodeCayenneLpp(hex('02 87 FF 80 00 03 67 01 10'));
    expect(coloured).toEqual({ colour: { '2': { r: 255, g: 128, b: 0 } }, temperatureSensor: { '3': 27.2 } });
    expect(lines(coloured)).toEqual(['temperature/3=27.2 °C']);
    expect(measurementsFromObject(coloured).unknown).toEqual([]);
  });

  it('stops at an unknown type or a truncated value, keeping the channels before it', () => {
    expect(decodeCayenneLpp(hex('03 67 01 10 05 FE 00 FF'))).toEqual({ temperatureSensor: { '3': 27.2 } });
    expect(decodeCayenneLpp(hex('03 67 01 10 05 67 00'))).toEqual({ temperatureSensor: { '3': 27.2 } });
    expect(decodePayload('cayenne-lpp', hex('FF FE'), 1)).toBeNull();
  });
});

describe('Dragino LHT65, against the example of its user manual', () => {
  it('reads CB F6 0B 0D 03 76 01 0A DD 7F FF: 3.062 V, 28.29 °C, 88.6 %RH, probe 27.81 °C', () => {
    const object = decodeDraginoLht65(hex('CB F6 0B 0D 03 76 01 0A DD 7F FF'), 2);
    expect(object).toEqual({
      BatV: 3.062,
      Bat_status: 3,
      TempC_SHT: 28.29,
      Hum_SHT: 88.6,
      Ext_sensor: 1,
      TempC_DS: 27.81,
    });
    expect(lines(object)).toEqual([
      'battery/-=3.062 V',
      'temperature/-=28.29 °C',
      'humidity/-=88.6 %',
      'temperature/ext=27.81 °C',
    ]);
  });

  it('reads a negative temperature and a disconnected probe', () => {
    // TempC_SHT 0xF8 0x30 = -20.00 °C; Ext 0x81 = DS18B20 with the "no connection" bit
    const object = decodeDraginoLht65(hex('CB F6 F8 30 01 F4 81 7F FF 7F FF'), 2);
    expect(object).toMatchObject({ TempC_SHT: -20, Hum_SHT: 50, Ext_no_connection: true });
    expect(object).not.toHaveProperty('TempC_DS');
  });

  it('gives nothing for another length or a poll reply', () => {
    expect(decodeDraginoLht65(hex('CB F6 0B 0D 03 76 01 0A DD 7F'), 2)).toBeNull();
    expect(decodeDraginoLht65(hex('CB F6 0B 0D 03 76 41 0A DD 7F FF'), 2)).toBeNull();
  });
});

describe('Elsys, against the example of its payload document', () => {
  it('reads 0100E202290400270506060308070D62: 22.6 °C, 41 %, 39 lux, motion 6, 776 ppm, 3426 mV', () => {
    const object = decodeElsys(hex('0100E202290400270506060308070D62'));
    expect(object).toEqual({ temperature: 22.6, humidity: 41, light: 39, motion: 6, co2: 776, vdd: 3426 });
    expect(lines(object)).toEqual([
      'temperature/-=22.6 °C',
      'humidity/-=41 %',
      'co2/-=776 ppm',
      'battery/-=3.426 V',
    ]);
    expect(measurementsFromObject(object).unknown).toEqual([]);
  });

  it('reads pressure, external temperatures (repeated: an array) and stops at an unknown type', () => {
    const object = decodeElsys(hex('14 000F6C4C 0C FF9C 19 00C8 19 00D2 7F 01'));
    expect(object).toEqual({ pressure: 1010.764, externalTemperature: -10, externalTemperature2: [20, 21] });
    expect(lines(object)).toEqual([
      'pressure/-=1010.764 hPa',
      'temperature/ext=-10 °C',
      'temperature/ext2.1=20 °C',
      'temperature/ext2.2=21 °C',
    ]);
  });
});

describe('the decoded-object field map', () => {
  it('maps The Things Stack LPP names with a channel suffix', () => {
    expect(
      lines({ temperature_3: 27.200000762939453, relative_humidity_5: 40, barometric_pressure_1: 1000 }),
    ).toEqual(['temperature/3=27.200000762939453 °C', 'humidity/5=40 %', 'pressure/1=1000 hPa']);
  });

  it('drops a value outside its sanity range with the reason, and names unknown fields', () => {
    const mapped = measurementsFromObject({ temperature: 900, humidity: 40, firmware: 'x', Work_mode: 1 });
    expect(mapped.measurements.map((m) => m.kind)).toEqual(['humidity']);
    expect(mapped.dropped).toEqual([expect.stringMatching(/^temperature: /)]);
    expect(mapped.unknown).toEqual(['firmware', 'Work_mode']);
  });

  it('names the decoder of each LoRaWAN model', () => {
    expect(decoderForModel('cayenne-lpp')).toBe('cayenne-lpp');
    expect(decoderForModel('dragino-lht65')).toBe('dragino-lht65');
    expect(decoderForModel('elsys-ers')).toBe('elsys');
    expect(decoderForModel('elsys-ers-co2')).toBe('elsys');
    expect(decoderForModel('lorawan-generic')).toBe('none');
  });
});
