// Simulated hosts on one machine: a free loopback port for node 0's store, and `symmkit run` as node
// `nodeRank` of a two-host job (test/multi-host.test.ts on CPUs, test/gpu/hosts.test.ts on GPUs).
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "src", "cli.js");

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Runs `symmkit run --nnodes 2 --node-rank <nodeRank>` with `perNode` ranks of `command` (a script, or
 * argv after `--`), the store at 127.0.0.1:`port`, the job's `token`; killed after `timeoutMs`.
 */
export function launchHost(o: {
  nodeRank: number;
  port: number;
  token: string;
  command: string[];
  perNode?: number;
  launcherArgs?: string[];
  env?: Record<string, string>;
  timeoutMs?: number;
}): Promise<{ status: number | null; out: string }> {
  const args = [cli, "run", "--nnodes", "2", "--node-rank", String(o.nodeRank), "--master-addr", "127.0.0.1"];
  args.push("--master-port", String(o.port), "-n", String(o.perNode ?? 2), "--grace-ms", "1000");
  args.push(...(o.launcherArgs ?? []), ...o.command);
  const p = spawn(process.execPath, args, { env: { ...process.env, ...o.env, SYMMKIT_JOB_TOKEN: o.token } });
  let out = "";
  p.stdout.on("data", (d: Buffer) => (out += d.toString()));
  p.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => p.kill("SIGKILL"), o.timeoutMs ?? 60_000);
  return new Promise((resolve) =>
    p.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, out });
    }),
  );
}
