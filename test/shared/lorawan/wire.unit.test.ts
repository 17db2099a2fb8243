import fs from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from '@jest/globals';
import integration from '@chirpstack/chirpstack-api/integration/integration_pb.js';
import structPb from 'google-protobuf/google/protobuf/struct_pb.js';
import { chirpstackUpProtobuf } from '../../../hardware/emulators/lorawan-webhook.ts';
import {
  ChirpstackEventError,
  parseDeviceEvent,
  parseUplinkEvent,
} from '../../../shared/lorawan/chirpstack-events.ts';
import { checkWire, MESSAGE_FIELDS, WireError } from '../../../shared/lorawan/chirpstack-wire.ts';

const require = createRequire(import.meta.url);

/**
 * The message-typed fields of each class as the installed package's generated code reads them:
 * `case N: var value = new X; reader.readMessage(value, …)`, and map fields
 * (`reader.readMessage(value, function …)`, entries of key 1 and value 2).
 */
function generatedFields(): Record<string, Record<number, string>> {
  const files = [
    '@chirpstack/chirpstack-api/integration/integration_pb.js',
    '@chirpstack/chirpstack-api/common/common_pb.js',
    '@chirpstack/chirpstack-api/gw/gw_pb.js',
    'google-protobuf/google/protobuf/struct_pb.js',
  ];
  const out: Record<string, Record<number, string>> = {};
  for (const file of files) {
    const source = fs.readFileSync(require.resolve(file), 'utf8');
    const functions = source.matchAll(
      /proto\.([\w.]+)\.deserializeBinaryFromReader = function\(msg, reader\) \{([\s\S]*?)\n\};/g,
    );
    for (const [, name, body] of functions) {
      const fields: Record<number, string> = {};
      for (const [, n, type] of body!.matchAll(
        /case (\d+):\s*var value = new ([\w.]+);\s*reader\.readMessage\(value,/g,
      ))
        fields[Number(n)] = type!.split('.').pop()!;
      for (const [, n, mapBody] of body!.matchAll(
        /case (\d+):\s*var value = msg\.get\w+\(\);\s*reader\.readMessage\(value, function[\s\S]*?jspb\.Map\.deserializeBinary\(([^;]*)\)/g,
      ))
        fields[Number(n)] = /deserializeBinaryFromReader/.test(mapBody!) ? 'ValueEntry' : 'StringEntry';
      out[name!] = fields;
      out[name!.split('.').pop()!] = fields;
    }
  }
  return out;
}

describe('the wire check of ChirpStack protobuf events', () => {
  it('names the message fields the installed package reads, for every message an event holds', () => {
    const generated = generatedFields();
    for (const [message, fields] of Object.entries(MESSAGE_FIELDS)) {
      if (message === 'integration.IntegrationEvent' || message.endsWith('Entry')) continue;
      if (message === 'Timestamp' || message === 'Duration') continue; // scalars only
      expect([message, fields]).toEqual([message, generated[message]]);
    }
    // Every message a listed one holds is listed too.
    for (const fields of Object.values(MESSAGE_FIELDS))
      for (const nested of Object.values(fields)) expect(Object.keys(MESSAGE_FIELDS)).toContain(nested);
  });

  it('refuses at once a body whose length, at any depth, claims more than it holds', () => {
    const bodies = [
      '1a0612ffffffff0f', // device_info (3) holding a tenant name (2) of 4 GiB: minutes in google-protobuf
      '22d4edae3f90', // a top-level string of 128 MiB in 6 bytes
      '1a06' + '0ad4edae3f90', // a nested string past its message's end
      '5a0a0a080a06' + '0a04ffffff0f', // object (11) → fields entry → key of 2^28 bytes
    ];
    for (const hex of bodies) {
      const started = performance.now();
      expect(() => parseUplinkEvent(Buffer.from(hex, 'hex'), 'protobuf')).toThrow(ChirpstackEventError);
      expect(() => parseDeviceEvent('status', Buffer.from(hex, 'hex'), 'protobuf')).toThrow(
        ChirpstackEventError,
      );
      expect(() => parseDeviceEvent('integration', Buffer.from(hex, 'hex'), 'protobuf')).toThrow(
        ChirpstackEventError,
      );
      expect(performance.now() - started).toBeLessThan(200);
    }
  });

  it('refuses nesting beyond 64 messages, groups and field 0, and passes what the emulator sends', () => {
    // Value { list_value (6): ListValue { values (1): Value { … } } }, 70 lists deep.
    const delimited = (field: number, inner: Buffer) => {
      const length: number[] = [];
      for (let n = inner.length; ; n >>>= 7) {
        if (n < 0x80) {
          length.push(n);
          break;
        }
        length.push((n & 0x7f) | 0x80);
      }
      return Buffer.concat([Buffer.from([(field << 3) | 2, ...length]), inner]);
    };
    let deep = Buffer.alloc(0);
    for (let i = 0; i < 70; i++) deep = delimited(6, delimited(1, deep));
    expect(() => checkWire(deep, 'Value')).toThrow(/nested deeper than 64/);
    expect(() => checkWire(deep.subarray(0, 0), 'Value')).not.toThrow();
    expect(() => checkWire(Buffer.from('5a00', 'hex'), 'integration.UplinkEvent')).not.toThrow();
    expect(() => checkWire(Buffer.from('0b', 'hex'), 'integration.UplinkEvent')).toThrow(WireError);
    expect(() => checkWire(Buffer.from('0001', 'hex'), 'integration.UplinkEvent')).toThrow(WireError);
    const up = chirpstackUpProtobuf({
      devEui: '0101010101010101',
      fCnt: 1,
      data: Buffer.from('03670110', 'hex'),
      object: { temperature: 21.5, nested: { list: [1, 'two', { three: true }] } },
    });
    expect(() => checkWire(up, 'integration.UplinkEvent')).not.toThrow();
  });

  it('decodes an uplink whose codec object holds a value of no kind as one without an object, not a 500', () => {
    const event = new integration.UplinkEvent();
    const info = new integration.DeviceInfo();
    info.setDevEui('0101010101010101');
    event.setDeviceInfo(info);
    event.setData(Buffer.from('03670110', 'hex'));
    const object = new structPb.Struct();
    object.getFieldsMap().set('temperature', new structPb.Value());
    event.setObject(object);
    const up = parseUplinkEvent(Buffer.from(event.serializeBinary()), 'protobuf');
    expect(up).toMatchObject({ devEui: '0101010101010101', object: null });
  });
});
