// What NCCL would use between hosts on this machine (`symmkit doctor`): InfiniBand / RoCE through
// verbs when a device has an active port and libibverbs is there, else TCP sockets on the interface its
// defaults pick. A reading of the machine by NCCL's documented rules, not NCCL's own choice (that needs
// a communicator: NCCL_DEBUG=INFO prints it); an explicit NCCL_NET or net plugin is reported as such.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export interface IbPort {
  readonly device: string;
  readonly port: string;
  readonly state: string;
  readonly rate: string;
  readonly linkLayer: string;
}

export interface HostNetwork {
  /** One line: the transport NCCL would take between hosts, and why. */
  readonly transport: string;
  readonly ibPorts: readonly IbPort[];
  /** libibverbs, where found. */
  readonly verbs: string | undefined;
  /** A net plugin (libnccl-net*.so), where found. */
  readonly plugin: string | undefined;
  /** The interface NCCL's socket transport would bind, where one qualifies. */
  readonly socketInterface: string | undefined;
  /** The NCCL_* variables that steer the choice, as set here. */
  readonly env: Readonly<Record<string, string>>;
}

/** The machine as read: sysfs, the interfaces with their IPv4 addresses, the library directories. */
export interface HostView {
  readonly sysfsRoot: string;
  readonly interfaces: Readonly<Record<string, readonly string[]>>;
  readonly libDirs: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
}

const STEERING = ["NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"];

export function thisHost(): HostView {
  const interfaces = Object.fromEntries(
    Object.entries(os.networkInterfaces()).map(([name, addrs]) => [
      name,
      (addrs ?? []).filter((a) => a.family === "IPv4").map((a) => a.address),
    ]),
  );
  const ld = (process.env.LD_LIBRARY_PATH ?? "").split(":").filter(Boolean);
  const libDirs = [...ld, "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"];
  return { sysfsRoot: "/sys", interfaces, libDirs, env: process.env };
}

function read(file: string): string {
  try {
    return fs.readFileSync(file, "utf8").trim();
  } catch {
    return "?";
  }
}

function ibPorts(sysfsRoot: string): IbPort[] {
  const root = path.join(sysfsRoot, "class", "infiniband");
  const list = (dir: string): string[] => {
    try {
      return fs.readdirSync(dir).sort();
    } catch {
      return [];
    }
  };
  return list(root).flatMap((device) =>
    list(path.join(root, device, "ports")).map((port) => {
      const p = path.join(root, device, "ports", port);
      return {
        device,
        port,
        state: read(path.join(p, "state")).replace(/^\d+:\s*/, ""),
        rate: read(path.join(p, "rate")),
        linkLayer: read(path.join(p, "link_layer")),
      };
    }),
  );
}

function findLibrary(dirs: readonly string[], match: RegExp): string | undefined {
  for (const dir of dirs) {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      continue;
    }
    const hit = names.filter((n) => match.test(n)).sort()[0];
    if (hit) return path.join(dir, hit);
  }
  return undefined;
}

/**
 * The interface NCCL's socket transport picks: NCCL_SOCKET_IFNAME's prefixes (a leading ^ excludes them,
 * = matches exactly), else an `ib` interface first, then any but docker and loopback, loopback last.
 */
export function socketInterface(
  interfaces: Readonly<Record<string, readonly string[]>>,
  ifname: string | undefined,
): string | undefined {
  const names = Object.keys(interfaces).filter((n) => (interfaces[n] ?? []).length > 0);
  if (ifname) {
    const exclude = ifname.startsWith("^");
    const exact = ifname.replace(/^\^/, "").startsWith("=");
    const list = ifname.replace(/^\^/, "").replace(/^=/, "").split(",").filter(Boolean);
    const hit = (n: string): boolean => list.some((p) => (exact ? n === p : n.startsWith(p)));
    return names.find((n) => hit(n) !== exclude);
  }
  return (
    names.find((n) => n.startsWith("ib")) ??
    names.find((n) => !n.startsWith("docker") && !n.startsWith("lo")) ??
    names.find((n) => n.startsWith("lo"))
  );
}

export function hostNetwork(view: HostView = thisHost()): HostNetwork {
  const env = Object.fromEntries(
    STEERING.filter((k) => view.env[k] !== undefined).map((k) => [k, view.env[k]!]),
  );
  const ports = ibPorts(view.sysfsRoot);
  const active = ports.filter((p) => p.state === "ACTIVE");
  const verbs = findLibrary(view.libDirs, /^libibverbs\.so(\.\d+)*$/);
  const plugin = findLibrary(view.libDirs, /^libnccl-net.*\.so(\.\d+)*$/);
  const iface = socketInterface(view.interfaces, env.NCCL_SOCKET_IFNAME);
  const sockets = iface
    ? `TCP sockets on ${iface} (${(view.interfaces[iface] ?? []).join(", ")})`
    : "TCP sockets, but no interface qualifies";
  const ib = (): string =>
    `InfiniBand verbs on ${active
      .map((p) => `${p.device}:${p.port} (${p.linkLayer === "Ethernet" ? "RoCE" : p.linkLayer}, ${p.rate})`)
      .join(", ")}`;
  let transport: string;
  if (env.NCCL_NET) transport = `${env.NCCL_NET}, named by NCCL_NET`;
  else if (plugin || env.NCCL_NET_PLUGIN)
    transport = `the net plugin ${env.NCCL_NET_PLUGIN ?? plugin} (it chooses); without it, ${active.length && verbs ? ib() : sockets}`;
  else if (env.NCCL_IB_DISABLE === "1") transport = `${sockets} (NCCL_IB_DISABLE=1)`;
  else if (active.length && verbs) transport = ib();
  else
    transport = `${sockets}: ${
      ports.length === 0
        ? "no InfiniBand/RoCE device"
        : active.length === 0
          ? "no InfiniBand/RoCE port is ACTIVE"
          : "libibverbs not found"
    }`;
  return { transport, ibPorts: ports, verbs, plugin, socketInterface: iface, env };
}
