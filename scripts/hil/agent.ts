import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';

/**
 * The rig's processes inside the namespaces (the cloud, the emulated site) are "agents": the rig
 * starts them with `ip netns exec`, and talks to them over their stdin and stdout in JSON lines,
 * the only channel that crosses namespaces without an address. An agent prints `{"ready": info}`
 * once started, then answers each `{"id", "cmd", "args"}` with `{"id", "result"}` or
 * `{"id", "error"}`. Logs go to stderr.
 */

type Handler = (args: Record<string, unknown>) => Promise<unknown>;

/** In the agent: announces `info` and serves `handlers` until stdin closes (then `onClose`). */
export function serveAgent(
  info: unknown,
  handlers: Record<string, Handler>,
  onClose: () => Promise<void>,
): void {
  const write = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
  write({ ready: info });
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const { id, cmd, args } = JSON.parse(line) as { id: number; cmd: string; args?: Record<string, unknown> };
    const handler = handlers[cmd];
    if (!handler) {
      write({ id, error: `unknown command ${cmd}` });
      return;
    }
    handler(args ?? {}).then(
      (result) => write({ id, result: result ?? null }),
      (err: unknown) => write({ id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
  lines.on('close', () => {
    void onClose().finally(() => process.exit(0));
  });
}

/** In the rig: one agent process. */
export class Agent<Info> {
  readonly ready: Promise<Info>;
  private next = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly exited: Promise<number | string>;
  private stderr = '';

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
    private readonly log: (line: string) => void,
  ) {
    this.exited = new Promise((resolve) =>
      child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
    );
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-20_000);
      for (const line of chunk.toString().split('\n')) if (line.trim()) this.log(`[${name}] ${line}`);
    });
    let announce: (info: Info) => void;
    this.ready = new Promise<Info>((resolve, reject) => {
      announce = resolve;
      void this.exited.then((code) =>
        reject(new Error(`${name} exited (${code}) before it was ready:\n${this.stderr}`)),
      );
    });
    void this.exited.then((code) => {
      for (const p of this.pending.values()) p.reject(new Error(`${name} exited (${code})`));
      this.pending.clear();
    });
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let message: { ready?: Info; id?: number; result?: unknown; error?: string };
      try {
        message = JSON.parse(line) as typeof message;
      } catch {
        this.log(`[${name}] ${line}`);
        return;
      }
      if ('ready' in message) return announce(message.ready as Info);
      const p = this.pending.get(message.id ?? -1);
      if (!p) return;
      this.pending.delete(message.id!);
      if (message.error !== undefined) p.reject(new Error(`${name}: ${message.error}`));
      else p.resolve(message.result);
    });
  }

  static spawn<Info>(name: string, command: [string, string[]], log: (line: string) => void): Agent<Info> {
    const child = spawn(command[0], command[1], { stdio: ['pipe', 'pipe', 'pipe'] });
    return new Agent<Info>(name, child, log);
  }

  call<T>(cmd: string, args: Record<string, unknown> = {}, timeoutMs = 120_000): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: ${cmd} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.stdin!.write(`${JSON.stringify({ id, cmd, args })}\n`);
    });
  }

  /** Closes its stdin (it stops cleanly), then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
