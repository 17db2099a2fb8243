/** LoRaWAN payloads as emulated sensors send them (no I/O here: tests of every tier may use them). */

/** Cayenne LPP bytes for a temperature (channel 1) and a humidity (channel 2). */
export function cayenneLpp(temperature: number, humidity: number): Buffer {
  const b = Buffer.alloc(7);
  b.writeUInt8(1, 0);
  b.writeUInt8(0x67, 1);
  b.writeInt16BE(Math.round(temperature * 10), 2);
  b.writeUInt8(2, 4);
  b.writeUInt8(0x68, 5);
  b.writeUInt8(Math.round(humidity * 2), 6);
  return b;
}
