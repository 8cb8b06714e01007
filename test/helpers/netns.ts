import { execFile } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export interface ExecResult {
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  /** Merged over process.env; an undefined value removes the variable. */
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  /** Working directory; the test process's own by default. */
  cwd?: string;
}

export interface LabNode {
  index: number;
  /** Network namespace name (≤ 15 characters, unique per lab). */
  ns: string;
  /** Address of the node's `eth0` on the lab's underlay bridge. */
  underlayAddress: string;
}

/** The link between the host's own (root) namespace and the lab's bridge (`uplink: true`). */
export interface LabUplink {
  /** Name of the root-namespace end of the veth pair (carries the lab's suffix). */
  interfaceName: string;
  /** Its address in the underlay, 10.213.X.254; nodes reach the host's services here. */
  address: string;
}

export interface Lab {
  /** Random suffix shared by every name this lab created. */
  suffix: string;
  /** Temp directory owned by the lab; removed by destroy(). */
  dir: string;
  /** Namespace holding the bridge that joins the nodes. */
  hubNs: string;
  /** The underlay network, 10.213.X.0/24 with X random. */
  underlayCidr: string;
  nodes: LabNode[];
  /** Present with `uplink: true`: where processes in the host's namespace are reachable from the nodes. */
  uplink?: LabUplink;
  /** Runs `cmd args` inside `ns` (via `ip netns exec`); rejects with stderr on failure. */
  exec(ns: string, cmd: string, args: string[], options?: ExecOptions): Promise<ExecResult>;
  /** Kills every process left in the lab's namespaces, deletes them, removes dir. Idempotent. */
  destroy(): Promise<void>;
}

export interface CreateLabOptions {
  /** Name prefix, ≤ 4 characters so that `<prefix>-<suffix>-hub` fits in 15. */
  prefix?: string;
  /**
   * Also join the host's own (root) namespace to the bridge: a veth pair whose root end holds
   * 10.213.X.254/24 (see {@link LabUplink}), so a service listening there in the root namespace is
   * reachable from inside every node namespace. The only thing a lab adds outside its own
   * namespaces: one link (named with the lab's suffix) and the connected route of the lab's
   * private /24, both removed by destroy(). X is chosen so that the root namespace has no route
   * overlapping the subnet.
   */
  uplink?: boolean;
}

/** Runs a command on the host (no namespace) and rejects with its stderr on failure. */
export async function run(cmd: string, args: string[], options: ExecOptions = {}): Promise<ExecResult> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  try {
    const pending = execFileAsync(cmd, args, {
      env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      timeout: options.timeoutMs ?? 20_000,
      maxBuffer: 16 * 1024 * 1024,
      encoding: "utf8",
    });
    // A command may exit without reading its stdin (EPIPE); its exit status tells what happened.
    pending.child.stdin?.on("error", () => undefined);
    if (options.input === undefined) pending.child.stdin?.end();
    else pending.child.stdin?.end(options.input);
    const { stdout, stderr } = await pending;
    return { stdout, stderr };
  } catch (error) {
    const failure = error as { code?: unknown; signal?: unknown; stdout?: unknown; stderr?: unknown };
    const status = failure.signal != null ? `signal ${String(failure.signal)}` : `exit ${String(failure.code)}`;
    const stderr = typeof failure.stderr === "string" ? failure.stderr.trim() : "";
    const stdout = typeof failure.stdout === "string" ? failure.stdout.trim() : "";
    throw new Error(`${[cmd, ...args].join(" ")} failed (${status}): ${stderr || stdout || "no output"}`, {
      cause: error,
    });
  }
}

/**
 * Whether `pid` is still running. A daemon we signal has been re-parented to init, which may
 * reap it late, so a zombie (state Z in /proc/<pid>/stat) counts as ended.
 */
/**
 * Registers a cleanup that runs every step even when an earlier one fails, then throws one
 * AggregateError (named `what`) listing the failures; runs even when the test fails midway.
 */
export function cleanUpAfter(t: { after(fn: () => Promise<void>): void }, what: string, steps: Array<() => unknown>): void {
  t.after(async () => {
    const errors: unknown[] = [];
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, `${what} cleanup failed`);
  });
}

export function processAlive(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state !== "Z" && state !== "X";
}

/**
 * Ends every process still running inside `ns` (wireguard-go daemons above all): SIGTERM, then
 * SIGKILL after `graceMs`. They are found by pid with `ip netns pids`, so only processes inside
 * our own namespace are touched, never anything matched by name.
 */
export async function killNamespaceProcesses(ns: string, graceMs = 2_000): Promise<void> {
  const { stdout } = await run("ip", ["netns", "pids", ns]);
  const pids = stdout
    .split(/\s+/)
    .filter((word) => word !== "")
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid > 0 && pid !== process.pid);
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + graceMs;
  while (pids.some(processAlive) && Date.now() < deadline) await delay(50);
  for (const pid of pids.filter(processAlive)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // exited between the check and the kill
    }
  }
}

async function namespaceExists(ns: string): Promise<boolean> {
  const { stdout } = await run("ip", ["netns", "list"]);
  return stdout.split("\n").some((line) => line.split(" ")[0] === ns);
}

async function rootLinkExists(name: string): Promise<boolean> {
  const { stdout } = await run("ip", ["-o", "link", "show"]);
  return stdout.split("\n").some((line) => line.split(":")[1]?.trim().split("@")[0] === name);
}

/** An IPv4 prefix as [first address, last address], each as an unsigned 32-bit number. */
function ipv4Range(cidr: string): [number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)(?:\/(\d+))?$/.exec(cidr);
  if (match === null) return undefined;
  const octets = match.slice(1, 5).map(Number);
  const bits = match[5] === undefined ? 32 : Number(match[5]);
  if (octets.some((octet) => octet > 255) || bits > 32) return undefined;
  const value = octets.reduce((sum, octet) => sum * 256 + octet, 0);
  const size = 2 ** (32 - bits);
  const first = Math.floor(value / size) * size;
  return [first, first + size - 1];
}

/**
 * The destinations of every IPv4 route in every table of the root namespace, except default
 * routes (which any more specific route rightly overrides).
 */
async function rootRouteDestinations(): Promise<Array<{ destination: string; device: string | undefined }>> {
  const { stdout } = await run("ip", ["-4", "route", "show", "table", "all"]);
  const routes: Array<{ destination: string; device: string | undefined }> = [];
  for (const line of stdout.split("\n")) {
    const words = line.trim().split(/\s+/);
    // A route line may start with its type (local, broadcast, unicast, ...) before the prefix.
    const destination = words.find((word) => ipv4Range(word) !== undefined);
    if (destination === undefined || words[0] === "default") continue;
    const devIndex = words.indexOf("dev");
    routes.push({ destination, device: devIndex >= 0 ? words[devIndex + 1] : undefined });
  }
  return routes;
}

/** Root-namespace routes overlapping `cidr`, other than those through `ownDevice`. */
async function foreignRoutesOverlapping(cidr: string, ownDevice?: string): Promise<string[]> {
  const [first, last] = ipv4Range(cidr) ?? [0, -1];
  return (await rootRouteDestinations())
    .filter(({ destination, device }) => {
      if (ownDevice !== undefined && device === ownDevice) return false;
      const range = ipv4Range(destination);
      return range !== undefined && range[0] <= last && first <= range[1];
    })
    .map(({ destination, device }) => `${destination} dev ${device ?? "?"}`);
}

/**
 * Builds an isolated underlay of `n` node namespaces: a hub namespace holds a Linux bridge, and
 * each node namespace gets `eth0` (10.213.X.(i+1)/24), the far end of a veth pair whose near end
 * is a port of that bridge. Without `uplink`, nothing is created in the host's own namespace, so
 * every interface name below is private to a namespace of ours; only the namespace names are
 * global, and they carry a random suffix so parallel or aborted runs never collide. With
 * `uplink: true`, one more veth pair joins the root namespace (10.213.X.254) to the bridge; its
 * root end is named `<prefix>-<suffix>-up` and is the first thing destroy() deletes.
 */
export async function createLab(n: number, options: CreateLabOptions = {}): Promise<Lab> {
  const prefix = options.prefix ?? "svcl";
  if (n < 1 || n > 200) throw new RangeError(`a lab holds 1..200 nodes, not ${n}`);
  if (prefix.length > 4) throw new RangeError(`lab prefix "${prefix}" is longer than 4 characters`);
  const suffix = randomBytes(3).toString("hex").slice(0, 5);
  let subnet = randomInt(1, 251);
  if (options.uplink === true) {
    // The subnet becomes a route of the host itself: never one that overlaps a route it has.
    for (let attempt = 0; (await foreignRoutesOverlapping(`10.213.${subnet}.0/24`)).length > 0; attempt += 1) {
      if (attempt >= 50) throw new Error("no 10.213.X.0/24 free of the root namespace's routes for a lab uplink");
      subnet = randomInt(1, 251);
    }
  }
  const hubNs = `${prefix}-${suffix}-hub`;
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-${suffix}-`));
  const created: string[] = [];
  const nodes: LabNode[] = [];
  const uplinkName = `${prefix}-${suffix}-up`;
  let uplinkCreated = false;

  let destroying: Promise<void> | undefined;
  const destroy = (): Promise<void> => {
    destroying ??= (async () => {
      const errors: unknown[] = [];
      // The root-namespace link first: deleting one end of a veth pair deletes both.
      if (uplinkCreated) {
        try {
          if (await rootLinkExists(uplinkName)) await run("ip", ["link", "del", uplinkName]);
        } catch (error) {
          errors.push(error);
        }
      }
      // Node namespaces first (they hold the daemons), the hub last.
      for (const ns of [...created].reverse()) {
        try {
          if (!(await namespaceExists(ns))) continue;
          await killNamespaceProcesses(ns);
          await run("ip", ["netns", "del", ns]);
        } catch (error) {
          errors.push(error);
        }
      }
      await rm(dir, { recursive: true, force: true });
      if (errors.length > 0) throw new AggregateError(errors, `lab ${suffix}: cleanup failed`);
    })();
    return destroying;
  };

  const exec = (ns: string, cmd: string, args: string[], execOptions?: ExecOptions): Promise<ExecResult> =>
    run("ip", ["netns", "exec", ns, cmd, ...args], execOptions);

  let uplink: LabUplink | undefined;

  try {
    await run("ip", ["netns", "add", hubNs]);
    created.push(hubNs);
    await run("ip", ["-n", hubNs, "link", "add", "br0", "type", "bridge"]);
    await run("ip", ["-n", hubNs, "link", "set", "br0", "up"]);
    for (let index = 0; index < n; index += 1) {
      const ns = `${prefix}-${suffix}-n${index}`;
      const underlayAddress = `10.213.${subnet}.${index + 1}`;
      await run("ip", ["netns", "add", ns]);
      created.push(ns);
      const port = `v${index}`;
      await run("ip", ["-n", hubNs, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns]);
      await run("ip", ["-n", hubNs, "link", "set", port, "master", "br0", "up"]);
      await run("ip", ["-n", ns, "address", "add", `${underlayAddress}/24`, "dev", "eth0"]);
      await run("ip", ["-n", ns, "link", "set", "eth0", "up"]);
      await run("ip", ["-n", ns, "link", "set", "lo", "up"]);
      nodes.push({ index, ns, underlayAddress });
    }
    if (options.uplink === true) {
      const address = `10.213.${subnet}.254`;
      // Created in the root namespace with its peer born inside the hub namespace.
      await run("ip", ["link", "add", uplinkName, "type", "veth", "peer", "name", "up0", "netns", hubNs]);
      uplinkCreated = true;
      await run("ip", ["-n", hubNs, "link", "set", "up0", "master", "br0", "up"]);
      await run("ip", ["address", "add", `${address}/24`, "dev", uplinkName]);
      await run("ip", ["link", "set", uplinkName, "up"]);
      // A parallel lab may have picked the same subnet between our check and our address.
      const clash = await foreignRoutesOverlapping(`10.213.${subnet}.0/24`, uplinkName);
      if (clash.length > 0) throw new Error(`lab ${suffix}: uplink subnet 10.213.${subnet}.0/24 clashes with ${clash.join(", ")}`);
      uplink = { interfaceName: uplinkName, address };
    }
  } catch (error) {
    try {
      await destroy();
    } catch (cleanupError) {
      throw new AggregateError([error, cleanupError], `lab ${suffix}: setup failed, then cleanup failed`);
    }
    throw error;
  }

  return {
    suffix,
    dir,
    hubNs,
    underlayCidr: `10.213.${subnet}.0/24`,
    nodes,
    ...(uplink === undefined ? {} : { uplink }),
    exec,
    destroy,
  };
}
