import { describe, expect, it } from '@jest/globals';
import {
  chirpstackEventJson,
  chirpstackEventProtobuf,
  chirpstackStatusJson,
  chirpstackStatusProtobuf,
  chirpstackUpJson,
  chirpstackUpProtobuf,
  ttsUplinkJson,
} from '../../../hardware/emulators/lorawan-webhook.ts';
import {
  ChirpstackEventError,
  parseDeviceEvent,
  parseUplinkEvent,
  parseUplinkJson,
} from '../../../shared/lorawan/chirpstack-events.ts';
import { parseTtsMessage, TtsMessageError } from '../../../shared/lorawan/tts-messages.ts';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0);
const DATA = Buffer.from('03670110', 'hex');

describe('ChirpStack v4 events', () => {
  it('reads an up event alike from JSON and from protobuf', () => {
    const up = {
      devEui: '0101010101010101',
      deduplicationId: '3ac7e3c4-4401-4b8d-9386-a5c902f9202d',
      time: T0,
      fCnt: 0,
      fPort: 1,
      data: DATA,
      object: { temperatureSensor: { '3': 27.2 } },
      rx: [
        { gatewayId: '0016c001f153a14c', rssi: -112, snr: -3 },
        { gatewayId: '0016c001f153a14d', rssi: -36, snr: 10.5 },
      ],
    };
    const expected = {
      devEui: '0101010101010101',
      deduplicationId: up.deduplicationId,
      time: T0 * 1000,
      fCnt: 0,
      fPort: 1,
      data: DATA,
      object: up.object,
      rssi: -36,
    };
    expect(parseUplinkEvent(Buffer.from(chirpstackUpJson(up)), 'auto')).toEqual(expected);
    expect(parseUplinkEvent(chirpstackUpProtobuf(up), 'auto')).toEqual(expected);
  });

  it("takes a gateway's or the network server's time when the event has none, and lower-cases the DevEUI", () => {
    const body = JSON.parse(chirpstackUpJson({ devEui: 'A84041000181C0DE', time: T0, data: DATA }));
    delete body.time;
    const e = parseUplinkJson(Buffer.from(JSON.stringify(body)));
    expect([e.devEui, e.time, e.object]).toEqual(['a84041000181c0de', T0 * 1000, null]);
  });

  it('refuses a body that is not an up event', () => {
    expect(() => parseUplinkJson(Buffer.from('{'))).toThrow(ChirpstackEventError);
    expect(() => parseUplinkJson(Buffer.from('{"deviceInfo":{"devEui":"xyz"}}'))).toThrow(
      /deviceInfo.devEui/,
    );
    expect(() => parseUplinkEvent(Buffer.from('ffff', 'hex'), 'protobuf')).toThrow(ChirpstackEventError);
  });

  it('reads the battery level of status events, and none when the device cannot measure it', () => {
    expect(
      parseDeviceEvent('status', Buffer.from(chirpstackStatusJson('0505050505050505', 87.4, T0)), 'json'),
    ).toMatchObject({
      devEui: '0505050505050505',
      time: T0 * 1000,
      batteryLevel: 87.4,
    });
    expect(
      parseDeviceEvent('status', Buffer.from(chirpstackStatusJson('0505050505050505', null)), 'json')
        .batteryLevel,
    ).toBeNull();
    expect(
      parseDeviceEvent('status', chirpstackStatusProtobuf('0505050505050505', 55, T0), 'protobuf'),
    ).toMatchObject({
      batteryLevel: 55,
      time: T0 * 1000,
    });
  });

  it('reads no battery level from a device on external power (ChirpStack says 0 %)', () => {
    const json = parseDeviceEvent(
      'status',
      Buffer.from(chirpstackStatusJson('0505050505050505', 'external')),
      'json',
    );
    expect(json).toMatchObject({ externalPowerSource: true, batteryLevel: null });
    const pb = parseDeviceEvent(
      'status',
      chirpstackStatusProtobuf('0505050505050505', 'external'),
      'protobuf',
    );
    expect(pb).toMatchObject({ externalPowerSource: true, batteryLevel: null });
  });
});

describe('ChirpStack v4 events other than up and status', () => {
  it('reads the device and time of every other event type alike from JSON and from protobuf', () => {
    for (const type of ['join', 'ack', 'txack', 'log', 'location', 'integration'] as const) {
      for (const [encoding, body] of [
        ['json', Buffer.from(chirpstackEventJson(type, 'A84041000181C0DE', T0))],
        ['protobuf', chirpstackEventProtobuf(type, 'A84041000181C0DE', T0)],
      ] as const) {
        expect([type, encoding, parseDeviceEvent(type, body, encoding)]).toEqual([
          type,
          encoding,
          {
            devEui: 'a84041000181c0de',
            deduplicationId:
              type === 'txack' || type === 'log' ? '' : expect.stringMatching(/^[0-9a-f-]{36}$/),
            time: T0 * 1000,
          },
        ]);
      }
    }
  });

  it('refuses an integration event whose protobuf does not parse or names no device', () => {
    expect(() => parseDeviceEvent('integration', Buffer.from('0a02ffff', 'hex'), 'protobuf')).toThrow(
      ChirpstackEventError,
    );
    expect(() => parseDeviceEvent('integration', Buffer.from('0a0161', 'hex'), 'protobuf')).toThrow(
      /no DevEUI/,
    );
  });
});

describe('The Things Stack v3 messages', () => {
  it('defaults the fields TTS omits and keys the uplink by its as:up correlation id', () => {
    const m = parseTtsMessage(
      Buffer.from(
        ttsUplinkJson({
          devEui: 'A840410000000002',
          correlationIds: ['gs:uplink:01A', 'as:up:01HXYZ', 'ns:uplink:01B'],
          receivedAt: T0 + 900,
          rx: [
            { gatewayId: 'aa', rssi: -101, snr: 2, time: T0 + 20 },
            { gatewayId: 'bb', rssi: -90, snr: 5, time: T0 },
          ],
        }),
      ),
    );
    expect(m).toEqual({
      kind: 'uplink',
      devEui: 'a840410000000002',
      uplinkKey: 'as:up:01HXYZ',
      time: T0 * 1000,
      fCnt: 0,
      fPort: 0,
      data: Buffer.alloc(0),
      decoded: null,
      rssi: -90,
    });
  });

  it('takes received_at without gateway times, and knows a device without a DevEUI', () => {
    const m = parseTtsMessage(
      Buffer.from(ttsUplinkJson({ receivedAt: T0, rx: [{ gatewayId: 'aa', rssi: -80, snr: 1 }] })),
    );
    expect([m.devEui, m.time]).toEqual([null, T0 * 1000]);
    expect(() => parseTtsMessage(Buffer.from('{"uplink_message":{}}'))).toThrow(TtsMessageError);
  });
});
