import fs from 'node:fs';
import YAML from 'yaml';
import { z } from 'zod';

/**
 * The physical rig's file (docs/hil.md, "A physical rig"; example: hardware/hil/physical.example.yaml):
 * the real devices on the rig's LAN and how the rig observes what they send. Validated here, with
 * every problem named by its path.
 */

const deviceId = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'letters, digits, . _ : - only');
const seconds = z.number().positive();

const PhysicalSchema = z
  .object({
    /** The rig machine's network interface wired to the site's switch: it becomes the gateway's LAN. */
    lan: z
      .object({
        interface: z.string().regex(/^[A-Za-z0-9._-]{1,15}$/, 'a network interface name (ip link)'),
        /** The gateway's address on it, CIDR; the devices report to this address. */
        address: z
          .string()
          .regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, 'an IPv4 address with its prefix, e.g. 192.168.50.1/24'),
      })
      .strict(),
    /** Shelly H&T Gen1: action URL http://<lan address>:8081/. Checked by count (they send no time). */
    shelly_gen1: z.array(z.object({ id: deviceId, ip: z.ipv4() }).strict()).default([]),
    /** Shelly Plus H&T: MQTT server <lan address>:1883, RPC status notifications on. */
    shelly_plus: z.array(z.object({ id: deviceId, ip: z.ipv4() }).strict()).default([]),
    /** USB serial ports the gateway reads; `writer` is the other end of a null-modem cable the rig writes. */
    serial: z
      .array(
        z
          .object({
            port: z.string().startsWith('/dev/'),
            device: deviceId,
            writer: z.string().startsWith('/dev/').optional(),
            baud_rate: z.number().int().positive().default(9600),
            format: z.enum(['kv', 'vaisala']).default('kv'),
          })
          .strict(),
      )
      .default([]),
    /** A ChirpStack v4 server on the LAN: its MQTT broker (JSON integration) and the devices. */
    chirpstack: z
      .object({
        url: z.string().regex(/^mqtts?:\/\/[^/]+$/, 'mqtt://host:port or mqtts://host:port'),
        username: z.string().min(1).optional(),
        password: z.string().min(1).optional(),
        application_id: z
          .string()
          .regex(/^(\+|[0-9a-fA-F-]{1,64})$/)
          .default('+'),
        devices: z
          .array(
            z
              .object({
                dev_eui: z.string().regex(/^[0-9a-f]{16}$/, '16 lower-case hex digits'),
                model: z.string().min(1).default('lorawan-generic'),
                /** The channel the rig checks (its codec's temperature field). */
                kind: z.string().min(1).default('temperature'),
                label: z.string().min(1).nullable().default(null),
              })
              .strict(),
          )
          .min(1),
      })
      .strict()
      .optional(),
    /** The WAN's schedule, seconds; the defaults are the long form's. */
    timeline: z
      .object({
        warm_s: seconds.default(60),
        delay_s: seconds.default(60),
        cut_s: seconds.default(600),
        after_s: seconds.default(120),
        /** How often the rig writes a line to each serial writer. */
        serial_interval_s: seconds.default(5),
      })
      .strict()
      .default({ warm_s: 60, delay_s: 60, cut_s: 600, after_s: 120, serial_interval_s: 5 }),
  })
  .strict()
  .refine(
    (c) =>
      c.shelly_gen1.length + c.shelly_plus.length + c.serial.length + (c.chirpstack?.devices.length ?? 0) > 0,
    { message: 'list at least one device' },
  )
  .refine(
    (c) => !c.chirpstack || (c.chirpstack.username === undefined) === (c.chirpstack.password === undefined),
    {
      message: 'chirpstack: set both username and password, or neither',
    },
  );

export type PhysicalConfig = z.infer<typeof PhysicalSchema>;

export class PhysicalConfigError extends Error {}

/** Parses the physical rig's YAML text; throws PhysicalConfigError naming every problem. */
export function parsePhysicalConfig(text: string, source = 'the physical rig file'): PhysicalConfig {
  let raw: unknown;
  try {
    raw = YAML.parse(text);
  } catch (err) {
    throw new PhysicalConfigError(`${source} is not valid YAML: ${(err as Error).message}`);
  }
  const parsed = PhysicalSchema.safeParse(raw ?? {});
  if (!parsed.success)
    throw new PhysicalConfigError(
      `${source}: ${parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ')}`,
    );
  const c = parsed.data;
  const ids = [
    ...c.shelly_gen1.map((d) => d.id),
    ...c.shelly_plus.map((d) => d.id),
    ...c.serial.map((d) => d.device),
    ...(c.chirpstack?.devices.map((d) => d.dev_eui) ?? []),
  ];
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice) throw new PhysicalConfigError(`${source}: device ${twice} is listed twice`);
  const ports = c.serial.flatMap((s) => [s.port, ...(s.writer ? [s.writer] : [])]);
  const port = ports.find((p, i) => ports.indexOf(p) !== i);
  if (port) throw new PhysicalConfigError(`${source}: serial port ${port} is listed twice`);
  return c;
}

export function readPhysicalConfig(file: string): PhysicalConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new PhysicalConfigError(`cannot read ${file}: ${(err as Error).message}`);
  }
  return parsePhysicalConfig(text, file);
}
