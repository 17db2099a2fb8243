import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { Cloud } from '../cloud/src/cloud.ts';
import { loadConfig } from '../cloud/src/config.ts';
import { createLogger } from '../cloud/src/logger.ts';
import { ShellyHtGen1Emulator } from '../hardware/emulators/shelly-ht-gen1.ts';
import { apiClient, freePort, setUpAccount } from './bench/lib.ts';

/**
 * `npm run test:image`: boots the card image of scripts/build-image under qemu-system-aarch64 (the
 * `virt` machine with the image's own Debian arm64 kernel and initrd) and checks, from the host:
 *
 * 1. enrolment: a bridge bundle from a cloud running on the host and a gateway.yaml are written onto
 *    the image's FAT boot partition (mtools, as a laptop would), and the gateway takes them;
 * 2. the status page, through a forwarded port, says the uplink is connected;
 * 3. a reading from an emulated Shelly H&T Gen1 (through a second forwarded port) reaches the cloud
 *    and is returned by its REST API;
 * 4. after power-off, the card read back (mtools, debugfs): the files are gone from the boot
 *    partition, and the bundle is on the data partition, mode 0600, owned by the gateway's user.
 *
 * Slow (arm64 emulated on x86): minutes. Prints each step with its time; the serial console goes
 * to `--console FILE` (default: a temporary file, shown when a step fails).
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const DISK_ID = '5e6a7e01';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      image: { type: 'string', default: path.join(ROOT, 'dist/image/sensor-gateway-arm64.img') },
      'timeout-s': { type: 'string', default: '1200' },
      console: { type: 'string' },
    },
  });
  const image = path.resolve(values.image);
  const kernel = path.join(path.dirname(image), 'vmlinuz');
  const initrd = path.join(path.dirname(image), 'initrd.img');
  for (const f of [image, kernel, initrd])
    if (!fs.existsSync(f))
      throw new Error(`${f} is missing: build the image first (sudo scripts/build-image)`);
  const deadline = Date.now() + Number(values['timeout-s']) * 1000;
  const started = Date.now();
  const say = (line: string) =>
    process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'test-image-'));
  const consoleFile = values.console ? path.resolve(values.console) : path.join(dir, 'console.log');

  // The cloud on the host. qemu's user network shows the host's 127.0.0.1 to the guest as 10.0.2.2.
  const mqttPort = await freePort();
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    MQTT_PORT: String(mqttPort),
    MQTT_URL: `mqtts://10.0.2.2:${mqttPort}`,
    DATA_DIR: path.join(dir, 'cloud'),
    LOG_LEVEL: 'warn',
    RATE_LIMIT_MODE: 'warn',
  });
  const cloud = new Cloud({ config, log: createLogger('warn', process.stderr), mqttListenPort: mqttPort });
  await cloud.start();
  const account = await setUpAccount(cloud.url, config.dataDir, 0);
  const api = apiClient(cloud.url, account.token);
  const bundle = await api('POST', '/v1/bridges', { site_id: account.siteId, name: 'qemu' });
  say(`cloud on ${cloud.url}, MQTT bridge on :${mqttPort} (the guest's mqtts://10.0.2.2:${mqttPort})`);

  // A copy of the image with the installer's two files on its boot partition.
  const disk = path.join(dir, 'disk.img');
  execFileSync('cp', ['--sparse=always', image, disk]);
  const table = JSON.parse(execFileSync('sfdisk', ['--json', disk], { encoding: 'utf8' })) as {
    partitiontable: { partitions: { start: number }[] };
  };
  const bootOffset = table.partitiontable.partitions[0]!.start * 512;
  fs.writeFileSync(path.join(dir, 'bridge.json'), JSON.stringify(bundle));
  fs.writeFileSync(
    path.join(dir, 'gateway.yaml'),
    YAML.stringify({
      gateway: { id: 'gw-qemu', log_level: 'info' },
      collectors: { shelly_http: { port: 8081 } },
    }),
  );
  for (const f of ['bridge.json', 'gateway.yaml'])
    execFileSync('mcopy', ['-o', '-i', `${disk}@@${bootOffset}`, path.join(dir, f), `::/${f}`]);
  say('bridge.json and gateway.yaml written onto the boot partition (mtools)');

  const statusPort = await freePort();
  const shellyPort = await freePort();
  const out = fs.openSync(consoleFile, 'w');
  const qemu = spawn(
    'qemu-system-aarch64',
    [
      ...['-M', 'virt', '-cpu', 'cortex-a72', '-smp', '2', '-m', '1024', '-nographic'],
      ...['-kernel', kernel, '-initrd', initrd],
      ...['-append', `root=PARTUUID=${DISK_ID}-02 ro rootwait console=ttyAMA0`],
      ...['-drive', `file=${disk},format=raw,if=virtio`],
      ...[
        '-netdev',
        `user,id=net0,hostfwd=tcp:127.0.0.1:${statusPort}-:8080,hostfwd=tcp:127.0.0.1:${shellyPort}-:8081`,
      ],
      ...['-device', 'virtio-net-pci,netdev=net0'],
    ],
    { stdio: ['ignore', out, out] },
  );
  fs.closeSync(out);
  say(`qemu started (console in ${consoleFile}); status page on 127.0.0.1:${statusPort}`);

  const until = async <T>(what: string, probe: () => Promise<T | null>): Promise<T> => {
    for (;;) {
      if (qemu.exitCode !== null) throw new Error(`qemu exited (${qemu.exitCode}) waiting for ${what}`);
      const v = await probe().catch(() => null);
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  };
  let ok = false;
  try {
    const status = await until('the status page with the uplink connected', async () => {
      const res = await fetch(`http://127.0.0.1:${statusPort}/status.json`, {
        signal: AbortSignal.timeout(5000),
      });
      const s = (await res.json()) as { uplink: { state: string } };
      return s.uplink.state === 'connected' ? s : null;
    });
    say(`status page through the forwarded port: uplink ${status.uplink.state}`);
    const page = await (await fetch(`http://127.0.0.1:${statusPort}/`)).text();
    if (!page.includes('gw-qemu')) throw new Error('the status page does not name the gateway');
    const shelly = new ShellyHtGen1Emulator({
      url: `http://127.0.0.1:${shellyPort}/`,
      id: 'shellyht-QEMU01',
    });
    const code = await until('the Shelly report accepted', async () => {
      const c = await shelly.report({ temperature: 21.25, humidity: 40 });
      return c === 200 ? c : null;
    });
    say(`Shelly H&T Gen1 report to the guest's :8081: HTTP ${code}`);
    const point = await until('the reading in the cloud', async () => {
      const devices = (
        await api<{ data: { id: string; local_id: string }[] }>(
          'GET',
          `/v1/devices?site_id=${account.siteId}`,
        )
      ).data;
      const device = devices.find((d) => d.local_id === 'shellyht-QEMU01');
      if (!device) return null;
      const sensors = (
        await api<{ data: { channel_id: string; kind: string }[] }>('GET', `/v1/devices/${device.id}/sensors`)
      ).data;
      const temp = sensors.find((s) => s.kind === 'temperature');
      if (!temp) return null;
      const points = (
        await api<{ data: { ts: string; value: number }[] }>(
          'GET',
          `/v1/channels/${temp.channel_id}/measurements?from=${encodeURIComponent(new Date(started - 3600_000).toISOString())}`,
        )
      ).data;
      return points.find((p) => p.value === 21.25) ?? null;
    });
    say(`the cloud's API returns it: ${point.ts} temperature ${point.value}`);

    // Power off, then read the card as a laptop would: the key left the boot partition and sits on
    // the data partition, mode 0600, owned by the gateway's user.
    const exited = new Promise((r) => qemu.once('exit', r));
    qemu.kill('SIGKILL');
    await exited;
    const onBoot = (f: string) => {
      try {
        execFileSync('mtype', ['-i', `${disk}@@${bootOffset}`, `::/${f}`], { stdio: 'pipe' });
        return true;
      } catch {
        return false;
      }
    };
    if (onBoot('bridge.json') || onBoot('gateway.yaml'))
      throw new Error('the files are still on the boot partition');
    const dataOffset = table.partitiontable.partitions[2]!.start * 512;
    // -c: read-only, without the bitmaps, which the power cut left unflushed (the journal replays at boot).
    const debugfs = (command: string) =>
      execFileSync('debugfs', ['-c', '-R', command, `${disk}?offset=${dataOffset}`], {
        encoding: 'utf8',
        stdio: 'pipe',
        env: { ...process.env, DEBUGFS_PAGER: '__none__' },
      });
    const stat = debugfs('stat /config/bridge.json');
    const mode = /Mode:\s+(\d+)/.exec(stat)?.[1];
    const user = Number(/User:\s+(\d+)/.exec(stat)?.[1]);
    if (mode !== '0600' || !(user > 0)) throw new Error(`/config/bridge.json: mode ${mode}, user ${user}`);
    const installed = JSON.parse(debugfs('cat /config/bridge.json')) as { key_pem: string };
    if (installed.key_pem !== (bundle as { key_pem: string }).key_pem)
      throw new Error('the installed bundle differs');
    say(
      `enrolled: the boot partition no longer holds the files; the data partition's config/bridge.json is mode ${mode}, user ${user}`,
    );
    ok = true;
  } catch (err) {
    say(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
    say(`console (last lines):\n${fs.readFileSync(consoleFile, 'utf8').split('\n').slice(-40).join('\n')}`);
  } finally {
    qemu.kill('SIGKILL');
    await cloud.stop();
    if (!values.console) fs.rmSync(dir, { recursive: true, force: true });
  }
  say(ok ? 'image test passed' : 'image test FAILED');
  process.exit(ok ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `image test failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
