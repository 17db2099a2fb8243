import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ConfigError, loadConfig } from './config.ts';

/**
 * First-boot enrolment from the SD card's boot partition (the FAT one any laptop can write).
 *
 * The installer drops `bridge.json` (the answer of POST /v1/bridges, with the gateway's private
 * key) and/or `gateway.yaml` there. `enrolFromBoot` checks them together with what is already
 * installed (the configuration must load with the new files), then moves them beside the
 * configuration file: the bundle with mode 0600 and the settings with 0600 (they may hold
 * passwords), both owned by the owner of the configuration's folder (the service's user on the
 * image). Only once both are durably in place are they deleted from the boot partition. Invalid
 * files are left where they are, untouched, and nothing installed changes.
 *
 * `uplink.bundle` in an enrolled gateway.yaml always names the installed `bridge.json` (an
 * installer may leave it out).
 */

export const BOOT_BUNDLE = 'bridge.json';
export const BOOT_SETTINGS = 'gateway.yaml';

export class EnrolError extends Error {}

export interface EnrolResult {
  /** What was installed from the boot partition (file names), empty when there was nothing. */
  installed: string[];
  /** The configuration file the gateway then runs with. */
  configFile: string;
}

function readIfExists(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Writes `text` to `file` with `mode`, owned as given, and flushes it to the storage. */
function writeDurably(file: string, text: string, mode: number, owner: { uid: number; gid: number }): void {
  const fd = fs.openSync(file, 'w', mode);
  try {
    fs.writeFileSync(fd, text);
    fs.fchmodSync(fd, mode);
    if (process.getuid?.() === 0) fs.fchownSync(fd, owner.uid, owner.gid);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Flushes a folder's entries (renames, deletions). Some file systems refuse it: best effort. */
function syncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // FAT on some kernels answers EINVAL; the deletion is still done, and a reboot at worst enrols again.
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** The settings file with `uplink.bundle` naming the installed bundle, comments kept. */
function withInstalledBundle(text: string, source: string): string {
  const doc = YAML.parseDocument(text);
  if (doc.errors.length) throw new EnrolError(`${source} is not valid YAML: ${doc.errors[0]!.message}`);
  if (doc.contents === null) return YAML.stringify({ uplink: { bundle: `./${BOOT_BUNDLE}` } });
  if (!YAML.isMap(doc.contents)) throw new EnrolError(`${source}: expected a mapping of settings`);
  doc.setIn(['uplink', 'bundle'], `./${BOOT_BUNDLE}`);
  return doc.toString();
}

/**
 * Installs the files found in `bootDir` for the gateway configured by `configFile` (see above).
 * Throws EnrolError, naming the file and what is wrong, when they do not make a valid configuration.
 */
export function enrolFromBoot(options: { bootDir: string; configFile: string }): EnrolResult {
  const configFile = path.resolve(options.configFile);
  const configDir = path.dirname(configFile);
  const bootBundle = path.join(options.bootDir, BOOT_BUNDLE);
  const bootSettings = path.join(options.bootDir, BOOT_SETTINGS);
  const newBundle = readIfExists(bootBundle);
  const newSettings = readIfExists(bootSettings);
  if (newBundle === null && newSettings === null) return { installed: [], configFile };

  if (!fs.existsSync(configDir)) throw new EnrolError(`the configuration folder ${configDir} does not exist`);
  const { uid, gid } = fs.statSync(configDir);
  const settings = newSettings ?? readIfExists(configFile);
  if (settings === null) {
    throw new EnrolError(
      `no ${BOOT_SETTINGS}: put one beside ${BOOT_BUNDLE} on the boot partition (${options.bootDir})`,
    );
  }
  const settingsText = withInstalledBundle(settings, newSettings !== null ? bootSettings : configFile);
  const bundleText = newBundle ?? readIfExists(path.join(configDir, BOOT_BUNDLE));
  if (bundleText === null) {
    throw new EnrolError(
      `no ${BOOT_BUNDLE}: put the bridge bundle (POST /v1/bridges) on the boot partition (${options.bootDir})`,
    );
  }

  // The new files are checked together, as the gateway will load them, in a folder of their own
  // beside the configuration (same file system: the renames below are atomic).
  const staging = fs.mkdtempSync(path.join(configDir, '.enrol-'));
  try {
    const owner = { uid, gid };
    writeDurably(path.join(staging, BOOT_BUNDLE), bundleText, 0o600, owner);
    writeDurably(path.join(staging, path.basename(configFile)), settingsText, 0o600, owner);
    try {
      loadConfig(path.join(staging, path.basename(configFile)));
    } catch (err) {
      if (err instanceof ConfigError) {
        const shown = err.message.split(staging).join(options.bootDir);
        throw new EnrolError(`the files on the boot partition do not make a valid configuration: ${shown}`);
      }
      throw err;
    }
    const installed: string[] = [];
    if (newBundle !== null) {
      fs.renameSync(path.join(staging, BOOT_BUNDLE), path.join(configDir, BOOT_BUNDLE));
      installed.push(BOOT_BUNDLE);
    }
    fs.renameSync(path.join(staging, path.basename(configFile)), configFile);
    if (newSettings !== null) installed.push(BOOT_SETTINGS);
    syncDir(configDir);
    // Installed for good: only now does the key leave the boot partition.
    if (newBundle !== null) fs.rmSync(bootBundle);
    if (newSettings !== null) fs.rmSync(bootSettings);
    syncDir(options.bootDir);
    return { installed, configFile };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}
