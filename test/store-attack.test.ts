// The launcher's rendezvous store under attack by whoever can reach its port, before the ranks join and
// while the job runs: idle connections (more than the store lets wait for their hello, each replaced as
// soon as it is closed), slowloris hellos (a byte at a time), and garbage. The ranks must join at once and
// their rounds of store barriers and counters go on; the launcher's memory must come back to what it was.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { FrameWriter, Op } from "../src/distributed/store/protocol.js";
import { freePort } from "./support/hosts.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, "..", "src", "cli.js");
const fixture = path.join(here, "fixtures", "attack-rank.js");
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether something listens on `port` yet. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** Resident memory of process `pid`, in MiB. */
function rssMiB(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) / 1024;
}

/** Hostile connections to one port, each kind kept up by loops that reconnect until stopped. */
class Attack {
  connections = 0;
  #stopped = false;
  readonly #loops: Promise<void>[] = [];
  readonly #open = new Set<net.Socket>();
  readonly #garbage = crypto.randomBytes(1 << 16);

  constructor(readonly port: number) {}

  /** `n` loops, each holding one connection at a time and doing `act` with it until it closes. */
  #keep(n: number, act: (s: net.Socket, closed: Promise<void>) => Promise<void>): void {
    const loop = async (): Promise<void> => {
      while (!this.#stopped) {
        const s = net.connect(this.port, "127.0.0.1");
        s.on("error", () => undefined);
        s.resume();
        const closed = new Promise<void>((done) => s.once("close", () => done()));
        this.#open.add(s);
        const connected = await Promise.race([
          new Promise<boolean>((done) => s.once("connect", () => done(true))),
          closed.then(() => false),
        ]);
        if (connected) {
          this.connections++;
          await act(s, closed);
        }
        s.destroy();
        this.#open.delete(s);
        await closed;
      }
    };
    for (let i = 0; i < n; i++) this.#loops.push(loop());
  }

  /** Connections that send nothing: only the store's hello deadline, or a newcomer, ends them. */
  idle(n: number): this {
    this.#keep(n, (_s, closed) => closed);
    return this;
  }

  /** A hello with a wrong token, a byte every 100 ms: never finished within the hello deadline. */
  slowloris(n: number): this {
    const hello = new FrameWriter().u8(Op.Hello).bytes(Buffer.alloc(1000, 7)).frame();
    this.#keep(n, async (s) => {
      for (let i = 0; i < hello.length && !s.destroyed && !this.#stopped; i++) {
        s.write(hello.subarray(i, i + 1));
        await sleep(100);
      }
    });
    return this;
  }

  /** Up to 64 KiB of random bytes, then the connection is dropped. */
  garbage(n: number): this {
    this.#keep(n, async (s) => {
      s.write(this.#garbage.subarray(0, 1 + crypto.randomInt(this.#garbage.length)));
      await sleep(5);
    });
    return this;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const s of this.#open) s.destroy();
    await Promise.all(this.#loops);
  }
}

test("strangers cannot hold the store shut, before or during a job; the launcher's memory comes back", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-attack-"));
  const files = { GO: path.join(dir, "go"), STOP: path.join(dir, "stop"), END: path.join(dir, "end") };
  const port = await freePort();
  const launcher = spawn(
    process.execPath,
    [cli, "run", "-n", "2", "--grace-ms", "500", "--master-port", String(port), fixture],
    { env: { ...process.env, ...files }, stdio: ["ignore", "pipe", "pipe"] },
  );
  const lines: string[] = [];
  const seen: Record<string, (line: string) => void> = {};
  for (const stream of [launcher.stdout, launcher.stderr]) {
    let buf = "";
    stream.on("data", (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        lines.push(line);
        for (const f of Object.values(seen)) f(line);
      }
    });
  }
  const exited = new Promise<number | null>((resolve) => launcher.on("close", resolve));
  /** Resolves once `count` lines have matched `re` (within `ms`, else rejects saying what was seen). */
  const expect = (re: RegExp, count: number, ms: number): Promise<string[]> =>
    new Promise((resolve, reject) => {
      const got = lines.filter((l) => re.test(l));
      const key = re.source;
      const timer = setTimeout(() => {
        delete seen[key];
        reject(new Error(`${count} lines matching ${re} not seen in ${ms} ms:\n${lines.join("\n")}`));
      }, ms);
      const check = (): void => {
        if (got.length < count) return;
        clearTimeout(timer);
        delete seen[key];
        resolve(got);
      };
      seen[key] = (l) => {
        if (re.test(l)) got.push(l);
        check();
      };
      check();
    });
  const attack = new Attack(port);
  let sampler: NodeJS.Timeout | undefined;
  try {
    while (!(await listening(port))) await sleep(20);
    await sleep(300);
    const baseline = rssMiB(launcher.pid!);
    let peak = baseline;
    sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssMiB(launcher.pid!));
      } catch {
        // gone
      }
    }, 50);
    // Before the ranks join: more idle connections than the store lets wait, kept up; slowloris; garbage.
    attack.idle(80).slowloris(16).garbage(8);
    await sleep(750);
    const t0 = performance.now();
    fs.writeFileSync(files.GO, "");
    const joined = await expect(/^\[rank \d\] joined in \d+ ms$/, 2, 5000);
    const joinMs = performance.now() - t0;
    // During the job: the same, while the ranks run checked rounds of store barriers and counters.
    await sleep(1000);
    fs.writeFileSync(files.STOP, "");
    const rounds = await expect(/^\[rank \d\] rounds \d+ ok$/, 2, 10_000);
    await attack.stop();
    clearInterval(sampler);
    const stoppedAt = performance.now();
    // The memory the attack took comes back: the store's thread keeps little (its young generation is
    // small), and V8 gives back the rest once the process idles (within 15 s, unless the machine is busy).
    let after = rssMiB(launcher.pid!);
    while (after > baseline + 8 && performance.now() - stoppedAt < 15_000) {
      await sleep(250);
      after = rssMiB(launcher.pid!);
    }
    const backMs = performance.now() - stoppedAt;
    fs.writeFileSync(files.END, "");
    assert.equal(await exited, 0, lines.join("\n"));
    t.diagnostic(
      `${attack.connections} hostile connections; joined ${Math.round(joinMs)} ms after the ranks started ` +
        `(${joined.join("; ")}); ${rounds.join("; ")}; launcher RSS ${baseline.toFixed(1)} MiB before, ` +
        `${peak.toFixed(1)} peak, ${after.toFixed(1)} ${Math.round(backMs)} ms after the attack`,
    );
    assert.ok(joinMs < 3000, `the ranks took ${Math.round(joinMs)} ms to join`);
    assert.ok(peak - baseline < 48, `the launcher grew ${(peak - baseline).toFixed(1)} MiB under attack`);
    assert.ok(
      after <= baseline + 16,
      `the launcher's RSS is ${after.toFixed(1)} MiB ${Math.round(backMs)} ms after the attack, ${baseline.toFixed(1)} before`,
    );
  } finally {
    clearInterval(sampler);
    await attack.stop();
    launcher.kill("SIGKILL");
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
