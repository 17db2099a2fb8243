import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { loadConfig } from '../../gateway/src/config.ts';
import { EnrolError, enrolFromBoot } from '../../gateway/src/enrol.ts';
import { ROOT } from '../helpers/process.ts';
import { tempDir } from './helpers/gateway.ts';
import { makePki, writeBundle, type TestPki } from './helpers/pki.ts';

/**
 * First-boot enrolment (gateway/src/enrol.ts): a "boot partition" folder as an installer leaves it
 * and the image's configuration folder, both temporary folders.
 */

const run = promisify(execFile);
let pki: TestPki;
let dir: string;
const SETTINGS = `# written on a laptop
gateway:
  id: gw-coldroom
  data_dir: ./data
collectors:
  shelly_http: { host: 127.0.0.1, port: 0 }
`;

beforeAll(() => {
  pki = makePki(tempDir('gw-enrol-pki-'));
  dir = tempDir('gw-enrol-');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A boot folder and an empty configuration folder; as root the latter belongs to another user. */
function site(): {
  boot: string;
  configDir: string;
  configFile: string;
  owner: { uid: number; gid: number };
} {
  const base = fs.mkdtempSync(path.join(dir, 'site-'));
  const boot = path.join(base, 'boot');
  const configDir = path.join(base, 'config');
  fs.mkdirSync(boot);
  fs.mkdirSync(configDir, { mode: 0o750 });
  // The image's config folder belongs to the service's user: the files take that owner.
  if (process.getuid?.() === 0) fs.chownSync(configDir, 4321, 4322);
  const { uid, gid } = fs.statSync(configDir);
  return { boot, configDir, configFile: path.join(configDir, 'gateway.yaml'), owner: { uid, gid } };
}

const mode = (file: string) => fs.statSync(file).mode & 0o777;

describe('first-boot enrolment from the boot partition', () => {
  it('moves the bundle (0600, owned by the service user) and the settings into place, then deletes them from the boot partition', () => {
    const s = site();
    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://cloud.example.com:8883');
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), SETTINGS);
    const bundleText = fs.readFileSync(path.join(s.boot, 'bridge.json'), 'utf8');

    const result = enrolFromBoot({ bootDir: s.boot, configFile: s.configFile });

    expect(result.installed).toEqual(['bridge.json', 'gateway.yaml']);
    expect(fs.readdirSync(s.boot)).toEqual([]);
    const key = path.join(s.configDir, 'bridge.json');
    expect(fs.readFileSync(key, 'utf8')).toBe(bundleText);
    expect(mode(key)).toBe(0o600);
    expect(mode(s.configFile)).toBe(0o600);
    for (const f of [key, s.configFile]) {
      expect(fs.statSync(f).uid).toBe(s.owner.uid);
      expect(fs.statSync(f).gid).toBe(s.owner.gid);
    }
    // No staging folder left behind, and the result is the configuration the gateway loads.
    expect(fs.readdirSync(s.configDir).sort()).toEqual(['bridge.json', 'gateway.yaml']);
    const installed = fs.readFileSync(s.configFile, 'utf8');
    expect(installed).toContain('# written on a laptop');
    expect(YAML.parse(installed).uplink.bundle).toBe('./bridge.json');
    const config = loadConfig(s.configFile);
    expect(config.gatewayId).toBe('gw-coldroom');
    expect(config.uplink.url).toBe('mqtts://cloud.example.com:8883');
    expect(config.uplink.keyPem).toBe(pki.clientKeyPem);
    expect(config.dataDir).toBe(path.join(s.configDir, 'data'));
  });

  it('does nothing when the boot partition holds neither file', () => {
    const s = site();
    fs.writeFileSync(path.join(s.boot, 'config.txt'), 'arm_64bit=1\n');
    expect(enrolFromBoot({ bootDir: s.boot, configFile: s.configFile }).installed).toEqual([]);
    expect(fs.readdirSync(s.boot)).toEqual(['config.txt']);
    expect(fs.readdirSync(s.configDir)).toEqual([]);
  });

  it('refuses files that do not make a valid configuration, leaving them on the boot partition and the installed ones as they were', () => {
    const s = site();
    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://cloud.example.com:8883');
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), SETTINGS);
    enrolFromBoot({ bootDir: s.boot, configFile: s.configFile });
    const before = fs.readFileSync(s.configFile, 'utf8');

    // A typo in the settings: the unknown key is named, with the boot partition's path.
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), `${SETTINGS}colectors: {}\n`);
    expect(() => enrolFromBoot({ bootDir: s.boot, configFile: s.configFile })).toThrow(
      /do not make a valid configuration: .*colectors/,
    );
    expect(fs.readdirSync(s.boot)).toEqual(['gateway.yaml']);
    // A bundle without its key.
    fs.rmSync(path.join(s.boot, 'gateway.yaml'));
    const bundle = JSON.parse(fs.readFileSync(path.join(s.configDir, 'bridge.json'), 'utf8'));
    fs.writeFileSync(path.join(s.boot, 'bridge.json'), JSON.stringify({ ...bundle, key_pem: '' }));
    expect(() => enrolFromBoot({ bootDir: s.boot, configFile: s.configFile })).toThrow(/key_pem/);
    // Not JSON at all.
    fs.writeFileSync(path.join(s.boot, 'bridge.json'), 'saved as a web page');
    expect(() => enrolFromBoot({ bootDir: s.boot, configFile: s.configFile })).toThrow(EnrolError);
    expect(fs.readdirSync(s.boot)).toEqual(['bridge.json']);
    expect(fs.readFileSync(s.configFile, 'utf8')).toBe(before);
    expect(fs.readFileSync(path.join(s.configDir, 'bridge.json'), 'utf8')).toBe(JSON.stringify(bundle));
    expect(fs.readdirSync(s.configDir).sort()).toEqual(['bridge.json', 'gateway.yaml']);
  });

  it('asks for the settings when only a bundle arrives on a gateway never enrolled', () => {
    const s = site();
    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://cloud.example.com:8883');
    expect(() => enrolFromBoot({ bootDir: s.boot, configFile: s.configFile })).toThrow(/no gateway\.yaml/);
    expect(fs.readdirSync(s.boot)).toEqual(['bridge.json']);
  });

  it('a later bundle alone replaces the key and keeps the settings; later settings alone keep the key', () => {
    const s = site();
    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://cloud.example.com:8883');
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), SETTINGS);
    enrolFromBoot({ bootDir: s.boot, configFile: s.configFile });

    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://other.example.com:8883');
    expect(enrolFromBoot({ bootDir: s.boot, configFile: s.configFile }).installed).toEqual(['bridge.json']);
    expect(loadConfig(s.configFile).uplink.url).toBe('mqtts://other.example.com:8883');
    expect(loadConfig(s.configFile).gatewayId).toBe('gw-coldroom');

    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), SETTINGS.replace('gw-coldroom', 'gw-freezer'));
    expect(enrolFromBoot({ bootDir: s.boot, configFile: s.configFile }).installed).toEqual(['gateway.yaml']);
    expect(loadConfig(s.configFile).gatewayId).toBe('gw-freezer');
    expect(loadConfig(s.configFile).uplink.url).toBe('mqtts://other.example.com:8883');
    expect(fs.readdirSync(s.boot)).toEqual([]);
  });

  it('runs as the image starts it: --enrol-from, then --validate on what it installed', async () => {
    const s = site();
    writeBundle(path.join(s.boot, 'bridge.json'), pki, 'mqtts://cloud.example.com:8883');
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), SETTINGS);
    const main = ['--import', 'tsx', 'gateway/src/main.ts', '--config', s.configFile];
    const enrol = await run(process.execPath, [...main, '--enrol-from', s.boot], { cwd: ROOT });
    expect(enrol.stdout).toMatch(/enrolled: bridge\.json and gateway\.yaml/);
    expect(fs.readdirSync(s.boot)).toEqual([]);
    const validate = await run(process.execPath, [...main, '--validate'], { cwd: ROOT });
    expect(validate.stdout).toMatch(/valid \(gateway id gw-coldroom\)/);
    // Every later start finds nothing to do.
    const again = await run(process.execPath, [...main, '--enrol-from', s.boot], { cwd: ROOT });
    expect(again.stdout).toMatch(/nothing to install/);
    // Invalid files: exit 2, with the reason on stderr.
    fs.writeFileSync(path.join(s.boot, 'gateway.yaml'), 'gateway: [');
    const failed = await run(process.execPath, [...main, '--enrol-from', s.boot], { cwd: ROOT }).then(
      () => null,
      (err: { code: number; stderr: string }) => err,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toMatch(/enrol error: .*gateway\.yaml is not valid YAML/);
  }, 60_000);
});
