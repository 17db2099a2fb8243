/**
 * LoRaWAN payload decoders: the bytes of an uplink's FRMPayload turned into the object the vendor's
 * own codec yields, field names included, so that one field map (`decoded-object.ts`) reads both
 * what a network server decoded and what we decode. Pure functions, used by the cloud's webhooks
 * and the gateway's ChirpStack collector alike (docs/api/integrations.md, "Values").
 */

/** The decoders a device can have; `none` leaves the payload undecoded. */
export const PAYLOAD_DECODERS = ['none', 'cayenne-lpp', 'dragino-lht65', 'elsys'] as const;
export type PayloadDecoder = (typeof PAYLOAD_DECODERS)[number];

export type DecodedObject = Record<string, unknown>;

/** The decoder of a device model (cloud/src/devices/models.ts names them); `none` for the rest. */
export function decoderForModel(model: string): PayloadDecoder {
  if (model === 'cayenne-lpp') return 'cayenne-lpp';
  if (model === 'dragino-lht65') return 'dragino-lht65';
  if (model.startsWith('elsys-')) return 'elsys';
  return 'none';
}

/** Decodes `bytes` with `decoder`; null when there is nothing it can read. */
export function decodePayload(
  decoder: PayloadDecoder,
  bytes: Uint8Array,
  fPort: number,
): DecodedObject | null {
  if (bytes.length === 0) return null;
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (decoder) {
    case 'cayenne-lpp': {
      const object = decodeCayenneLpp(buf);
      return Object.keys(object).length > 0 ? object : null;
    }
    case 'dragino-lht65':
      return decodeDraginoLht65(buf, fPort);
    case 'elsys': {
      const object = decodeElsys(buf);
      return Object.keys(object).length > 0 ? object : null;
    }
    case 'none':
      return null;
  }
}

// ---- Cayenne LPP --------------------------------------------------------------------------------

interface LppType {
  /** The key ChirpStack's LPP codec gives this type's channel map. */
  name: string;
  size: number;
  read: (b: Buffer, o: number) => unknown;
}

const int24 = (b: Buffer, o: number) => b.readIntBE(o, 3);
const xyz = (scale: number) => (b: Buffer, o: number) => ({
  x: b.readInt16BE(o) / scale,
  y: b.readInt16BE(o + 2) / scale,
  z: b.readInt16BE(o + 4) / scale,
});

/**
 * The LPP data types (IPSO object id − 3200), with their sizes and resolutions: big-endian, signed
 * where the reference says so. The first twelve are myDevices' LPP reference, the types ChirpStack's
 * own codec knows (its key names). The rest are the extended LPP types of the CayenneLPP library
 * for Arduino (ElectronicCats, after The Things Network's), which devices send for the measurement
 * kinds the reference lacks: voltage, current, power and concentration (ppm, as CO2); the other
 * extended types are known by their size, so a payload decodes past them.
 */
const LPP_TYPES: Record<number, LppType> = {
  0x00: { name: 'digitalInput', size: 1, read: (b, o) => b.readUInt8(o) },
  0x01: { name: 'digitalOutput', size: 1, read: (b, o) => b.readUInt8(o) },
  0x02: { name: 'analogInput', size: 2, read: (b, o) => b.readInt16BE(o) / 100 },
  0x03: { name: 'analogOutput', size: 2, read: (b, o) => b.readInt16BE(o) / 100 },
  0x65: { name: 'illuminanceSensor', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x66: { name: 'presenceSensor', size: 1, read: (b, o) => b.readUInt8(o) },
  0x67: { name: 'temperatureSensor', size: 2, read: (b, o) => b.readInt16BE(o) / 10 },
  0x68: { name: 'humiditySensor', size: 1, read: (b, o) => b.readUInt8(o) / 2 },
  0x71: { name: 'accelerometer', size: 6, read: xyz(1000) },
  0x73: { name: 'barometer', size: 2, read: (b, o) => b.readUInt16BE(o) / 10 },
  0x86: { name: 'gyrometer', size: 6, read: xyz(100) },
  0x88: {
    name: 'gpsLocation',
    size: 9,
    read: (b, o) => ({
      latitude: int24(b, o) / 10_000,
      longitude: int24(b, o + 3) / 10_000,
      altitude: int24(b, o + 6) / 100,
    }),
  },
  0x64: { name: 'genericSensor', size: 4, read: (b, o) => b.readUInt32BE(o) },
  0x74: { name: 'voltage', size: 2, read: (b, o) => b.readUInt16BE(o) / 100 },
  0x75: { name: 'current', size: 2, read: (b, o) => b.readUInt16BE(o) / 1000 },
  0x76: { name: 'frequency', size: 4, read: (b, o) => b.readUInt32BE(o) },
  0x78: { name: 'percentage', size: 1, read: (b, o) => b.readUInt8(o) },
  0x79: { name: 'altitude', size: 2, read: (b, o) => b.readInt16BE(o) },
  // Concentration in ppm; named `co2` here, as our kinds read it (a codec's `concentration` field
  // may be another gas, so the field map does not take that name for CO2).
  0x7d: { name: 'co2', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x80: { name: 'power', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x82: { name: 'distance', size: 4, read: (b, o) => b.readUInt32BE(o) / 1000 },
  0x83: { name: 'energy', size: 4, read: (b, o) => b.readUInt32BE(o) / 1000 },
  0x84: { name: 'direction', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x85: { name: 'unixTime', size: 4, read: (b, o) => b.readUInt32BE(o) },
  0x87: {
    name: 'colour',
    size: 3,
    read: (b, o) => ({ r: b.readUInt8(o), g: b.readUInt8(o + 1), b: b.readUInt8(o + 2) }),
  },
  0x8e: { name: 'switch', size: 1, read: (b, o) => b.readUInt8(o) },
};

/**
 * Cayenne LPP: `[channel][type][data]…`, decoded into the channel maps ChirpStack's own LPP codec
 * yields (`{temperatureSensor: {"3": 27.2}}`). An unknown type or a truncated value stops decoding
 * there, keeping what came before (ChirpStack refuses the whole payload; a reading of the channels
 * before is worth more than none).
 */
export function decodeCayenneLpp(bytes: Buffer): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  let i = 0;
  while (i + 2 <= bytes.length) {
    const channel = bytes[i]!;
    const type = LPP_TYPES[bytes[i + 1]!];
    if (!type || i + 2 + type.size > bytes.length) break;
    (out[type.name] ??= {})[String(channel)] = type.read(bytes, i + 2);
    i += 2 + type.size;
  }
  return out;
}

// ---- Dragino LHT65 ------------------------------------------------------------------------------

/**
 * Dragino LHT65 (fPort 2, 11 bytes), as the vendor's decoder in the TTN device repository reads it:
 * battery volts and status, the built-in SHT20's temperature and humidity, and the external probe
 * by its type (`Ext`: 1 is a DS18B20 temperature probe; bit 7 says the probe is disconnected). Any
 * other length, and poll replies (bit 6 of byte 6), carry no reading: null.
 */
export function decodeDraginoLht65(bytes: Buffer, _fPort: number): DecodedObject | null {
  if (bytes.length !== 11) return null;
  const ext = bytes[6]!;
  if (ext & 0x40) return null; // a poll-message reply (datalog), not a live reading
  const out: DecodedObject = {
    BatV: (bytes.readUInt16BE(0) & 0x3fff) / 1000,
    Bat_status: bytes[0]! >> 6,
    TempC_SHT: bytes.readInt16BE(2) / 100,
    Hum_SHT: (bytes.readUInt16BE(4) & 0x0fff) / 10,
    Ext_sensor: ext & 0x0f,
  };
  if ((ext & 0x0f) === 1) {
    const raw = bytes.readInt16BE(7);
    // 0x7FFF is what the probe reads when it is absent; bit 7 flags the disconnection as well.
    if (!(ext & 0x80) && raw !== 0x7fff) out.TempC_DS = raw / 100;
    else out.Ext_no_connection = true;
  }
  return out;
}

// ---- Elsys --------------------------------------------------------------------------------------

interface ElsysType {
  name: string;
  size: number;
  read: (b: Buffer, o: number) => number;
}

/**
 * The Elsys TLV types our kinds can use, with the sizes of the others Elsys sensors send, so a
 * payload with them decodes past them. Names are those of Elsys' own decoder.
 */
const ELSYS_TYPES: Record<number, ElsysType> = {
  0x01: { name: 'temperature', size: 2, read: (b, o) => b.readInt16BE(o) / 10 },
  0x02: { name: 'humidity', size: 1, read: (b, o) => b.readUInt8(o) },
  0x03: { name: 'acceleration', size: 3, read: (b, o) => b.readInt8(o) },
  0x04: { name: 'light', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x05: { name: 'motion', size: 1, read: (b, o) => b.readUInt8(o) },
  0x06: { name: 'co2', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x07: { name: 'vdd', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x08: { name: 'analog1', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x09: { name: 'gps', size: 6, read: () => 0 },
  0x0a: { name: 'pulse1', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x0b: { name: 'pulseAbs', size: 4, read: (b, o) => b.readUInt32BE(o) },
  0x0c: { name: 'externalTemperature', size: 2, read: (b, o) => b.readInt16BE(o) / 10 },
  0x0d: { name: 'digital', size: 1, read: (b, o) => b.readUInt8(o) },
  0x0e: { name: 'distance', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x0f: { name: 'accMotion', size: 1, read: (b, o) => b.readUInt8(o) },
  0x10: { name: 'irInternalTemperature', size: 4, read: (b, o) => b.readInt16BE(o) / 10 },
  0x11: { name: 'occupancy', size: 1, read: (b, o) => b.readUInt8(o) },
  0x12: { name: 'waterleak', size: 1, read: (b, o) => b.readUInt8(o) },
  0x13: { name: 'grideye', size: 65, read: () => 0 },
  0x14: { name: 'pressure', size: 4, read: (b, o) => b.readUInt32BE(o) / 1000 },
  0x15: { name: 'soundPeak', size: 2, read: (b, o) => b.readUInt8(o) },
  0x16: { name: 'pulse2', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x17: { name: 'pulseAbs2', size: 4, read: (b, o) => b.readUInt32BE(o) },
  0x18: { name: 'analog2', size: 2, read: (b, o) => b.readUInt16BE(o) },
  0x19: { name: 'externalTemperature2', size: 2, read: (b, o) => b.readInt16BE(o) / 10 },
  0x1a: { name: 'digital2', size: 1, read: (b, o) => b.readUInt8(o) },
  0x1b: { name: 'analogUv', size: 4, read: (b, o) => b.readInt32BE(o) },
  0x1c: { name: 'tvoc', size: 2, read: (b, o) => b.readUInt16BE(o) },
};

/**
 * Elsys (ERS, ERS CO2 and kin): type-length-value records, `[type][value]…`, big-endian. An
 * unknown type stops parsing (its length is unknown), keeping what came before; `externalTemperature2`
 * may repeat and then becomes an array, as in Elsys' decoder.
 */
export function decodeElsys(bytes: Buffer): DecodedObject {
  const out: DecodedObject = {};
  let i = 0;
  while (i < bytes.length) {
    const type = ELSYS_TYPES[bytes[i]!];
    if (!type || i + 1 + type.size > bytes.length) break;
    const value = type.read(bytes, i + 1);
    if (type.name === 'externalTemperature2' && out[type.name] !== undefined) {
      const before = out[type.name];
      out[type.name] = Array.isArray(before) ? [...(before as number[]), value] : [before, value];
    } else if (type.name !== 'gps' && type.name !== 'grideye') {
      out[type.name] = value;
    }
    i += 1 + type.size;
  }
  return out;
}
