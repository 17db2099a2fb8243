import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RigResult } from '../../scripts/hil/run.ts';
import { rigNamespaces } from '../../scripts/hil/netns.ts';
import { ROOT } from '../helpers/process.ts';

/**
 * `npm run hil -- --short` as CI runs it: the cloud, the gateway and the four emulators in network
 * namespaces of their own, the WAN slowed, cut for seconds and restored, then every reading each
 * emulator was told was accepted is looked for in the cloud's API (scripts/hil/, docs/hil.md).
 * Needs root for `ip netns` (CI runs as root).
 */

function runRig(args: string[]): {
  output: () => string;
  exited: Promise<number | string>;
  signal: (s: NodeJS.Signals) => void;
  line: (re: RegExp) => Promise<RegExpExecArray>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/hil/run.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const w of [...waiters]) {
      const m = w.re.exec(output);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return {
    output: () => output,
    exited,
    signal: (s) => child.kill(s),
    line: (re) =>
      new Promise((resolve, reject) => {
        const m = re.exec(output);
        if (m) return resolve(m);
        waiters.push({ re, resolve });
        void exited.then(() => reject(new Error(`the rig exited before printing ${re}:\n${output}`)));
      }),
  };
}

describe('the hardware-in-the-loop rig, short form', () => {
  it('every reading each emulator was told was accepted arrives in the cloud exactly once across a WAN cut', async () => {
    const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'hil-test-')), 'result.json');
    const rig = runRig(['--short', '--json', json]);
    const id = (await rig.line(/^rig ([0-9a-f]{6}): namespaces/m))[1]!;
    const code = await rig.exited;
    expect({ code, output: code === 0 ? '' : rig.output() }).toEqual({ code: 0, output: '' });

    const result = JSON.parse(fs.readFileSync(json, 'utf8')) as RigResult;
    expect(result.ok).toBe(true);
    expect(result.check.devices.map((d) => d.source).sort()).toEqual([
      'chirpstack',
      'serial',
      'shelly-gen1',
      'shelly-plus',
    ]);
    for (const d of result.check.devices) {
      expect(d).toMatchObject({ lost: 0, duplicated: 0, unexpected: 0 });
      expect(d.accepted).toBeGreaterThan(5);
      expect(d.inCloud).toBeGreaterThanOrEqual(d.accepted);
    }
    // The cut was real: readings waited in the buffer, and were all sent once the WAN was back.
    expect(result.figures.maxBufferDepth).toBeGreaterThan(0);
    expect(result.figures.drainS).not.toBeNull();
    expect(result.failures).toEqual([]);
    // Nothing of the run is left behind.
    expect(rigNamespaces(id)).toEqual([]);
    fs.rmSync(path.dirname(json), { recursive: true, force: true });
  }, 300_000);

  it('removes its namespaces when it is stopped half-way', async () => {
    const rig = runRig(['--short']);
    const id = (await rig.line(/^rig ([0-9a-f]{6}): namespaces/m))[1]!;
    await rig.line(/^cloud up in /m);
    expect(rigNamespaces(id)).toHaveLength(3);
    rig.signal('SIGTERM');
    expect(await rig.exited).toBe(143);
    expect(rigNamespaces(id)).toEqual([]);
  }, 180_000);
});
