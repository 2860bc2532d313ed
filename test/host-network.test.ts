// What `symmkit doctor` says NCCL would use between hosts, on made-up machines: sysfs trees with and
// without InfiniBand/RoCE ports, libibverbs or a net plugin present or not, and NCCL's steering variables.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { hostNetwork, socketInterface, type HostView } from "../src/distributed/host-network.js";

/** Every made-up machine's tree lives under this folder, removed when the tests are done. */
const trees = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-net-"));
after(() => fs.rmSync(trees, { recursive: true, force: true }));

function machine(o: {
  ports?: { device: string; port: string; state: string; linkLayer: string }[];
  libs?: string[];
  env?: Record<string, string>;
}): HostView {
  const root = fs.mkdtempSync(path.join(trees, "machine-"));
  for (const p of o.ports ?? []) {
    const dir = path.join(root, "sys", "class", "infiniband", p.device, "ports", p.port);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "state"), `4: ${p.state}\n`);
    fs.writeFileSync(path.join(dir, "rate"), "400 Gb/sec (4X NDR)\n");
    fs.writeFileSync(path.join(dir, "link_layer"), `${p.linkLayer}\n`);
  }
  const lib = path.join(root, "lib");
  fs.mkdirSync(lib);
  for (const l of o.libs ?? []) fs.writeFileSync(path.join(lib, l), "");
  return {
    sysfsRoot: path.join(root, "sys"),
    interfaces: { lo: ["127.0.0.1"], docker0: ["172.17.0.1"], eth0: ["10.0.0.5"], ens5: ["10.1.0.5"] },
    libDirs: [lib],
    env: o.env ?? {},
  };
}

const verbs = ["libibverbs.so.1"];
const active = [{ device: "mlx5_0", port: "1", state: "ACTIVE", linkLayer: "InfiniBand" }];

test("InfiniBand with an active port and verbs; RoCE by link layer", () => {
  const ib = hostNetwork(machine({ ports: active, libs: verbs }));
  assert.equal(ib.transport, "InfiniBand verbs on mlx5_0:1 (InfiniBand, 400 Gb/sec (4X NDR))");
  assert.match(ib.verbs ?? "", /libibverbs\.so\.1$/);
  const roce = hostNetwork(machine({ ports: [{ ...active[0]!, linkLayer: "Ethernet" }], libs: verbs }));
  assert.match(roce.transport, /mlx5_0:1 \(RoCE, /);
});

test("sockets, saying why: no device, no active port, no verbs, IB disabled", () => {
  assert.equal(
    hostNetwork(machine({})).transport,
    "TCP sockets on eth0 (10.0.0.5): no InfiniBand/RoCE device",
  );
  const down = [{ ...active[0]!, state: "DOWN" }];
  assert.match(
    hostNetwork(machine({ ports: down, libs: verbs })).transport,
    /no InfiniBand\/RoCE port is ACTIVE/,
  );
  assert.match(hostNetwork(machine({ ports: active })).transport, /libibverbs not found/);
  const off = hostNetwork(machine({ ports: active, libs: verbs, env: { NCCL_IB_DISABLE: "1" } }));
  assert.equal(off.transport, "TCP sockets on eth0 (10.0.0.5) (NCCL_IB_DISABLE=1)");
  assert.deepEqual(off.env, { NCCL_IB_DISABLE: "1" });
});

test("NCCL_NET and a net plugin are reported as what chooses", () => {
  assert.equal(hostNetwork(machine({ env: { NCCL_NET: "Socket" } })).transport, "Socket, named by NCCL_NET");
  const plugin = hostNetwork(machine({ libs: ["libnccl-net.so"] }));
  assert.match(
    plugin.transport,
    /^the net plugin .*libnccl-net\.so \(it chooses\); without it, TCP sockets on eth0/,
  );
});

test("the socket interface by NCCL_SOCKET_IFNAME's rules", () => {
  const ifs = {
    lo: ["127.0.0.1"],
    docker0: ["172.17.0.1"],
    eth0: ["10.0.0.5"],
    ib0: ["10.2.0.5"],
    ens5: ["10.1.0.5"],
  };
  assert.equal(socketInterface(ifs, undefined), "ib0"); // ib first
  assert.equal(socketInterface({ lo: ["127.0.0.1"], docker0: ["1.1.1.1"] }, undefined), "lo"); // loopback last
  assert.equal(socketInterface(ifs, "ens"), "ens5"); // a prefix
  assert.equal(socketInterface(ifs, "^eth,ib,lo,docker"), "ens5"); // exclusions
  assert.equal(socketInterface(ifs, "=eth0"), "eth0"); // exact
  assert.equal(socketInterface(ifs, "=eth"), undefined);
  assert.equal(socketInterface({ eth0: [] }, undefined), undefined); // no IPv4 address: not a candidate
});
