import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

// The Node.js lines the service supports (README.md "Supported Node.js versions"): production
// runs one LTS major, named in four places that must not drift apart (the Docker base image,
// the version scripts/node-lts.sh installs for the CI run, "engines", the systemd unit's
// install notes); development and CI machines also run the suite on the Node 20 they ship.

const ROOT = join(import.meta.dirname, "..", "..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

/** Node 20's floor: Vite 8 and rolldown, which build the console in `npm start` and `npm test`. */
const DEV_RANGE = "^20.19.0";

const ltsVersion = /^NODE_LTS_VERSION=(\d+)\.(\d+)\.(\d+)$/m.exec(read("scripts/node-lts.sh"));
const ltsMajor = Number(ltsVersion?.[1]);

describe("supported Node.js versions", () => {
  test("scripts/node-lts.sh pins one exact release of an LTS line (an even major)", () => {
    assert.ok(ltsVersion, "NODE_LTS_VERSION=<major>.<minor>.<patch> in scripts/node-lts.sh");
    assert.equal(ltsMajor % 2, 0, `Node ${ltsMajor} is not an LTS line`);
    assert.ok(ltsMajor >= 24, "Node 20 and 22 are not the production line");
  });

  test("every Dockerfile stage is built on that LTS major", () => {
    const froms = [...read("Dockerfile").matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    assert.ok(froms.length > 0);
    assert.deepEqual(new Set(froms), new Set([`node:${ltsMajor}-bookworm-slim`]));
  });

  test('"engines" (package.json and the lockfile\'s root) is Node 20 from its floor, or the LTS major', () => {
    const expected = `${DEV_RANGE} || ^${ltsMajor}.0.0`;
    const pkg = JSON.parse(read("package.json")) as { engines?: { node?: string } };
    const lock = JSON.parse(read("package-lock.json")) as { packages: Record<string, { engines?: { node?: string } }> };
    assert.equal(pkg.engines?.node, expected);
    assert.equal(lock.packages[""]?.engines?.node, expected, "the lockfile's root entry mirrors package.json");
  });

  test("the node running this suite is one of the supported lines", () => {
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
    assert.ok(major === ltsMajor || (major === 20 && minor >= 19), `node ${process.version} is outside "engines"`);
  });

  test("the systemd unit and the README name the LTS; CI runs the test command on it as well", () => {
    assert.match(read("deploy/systemd/svc-backend.service"), new RegExp(`^# .*Node\\.js ${ltsMajor}\\b`, "m"));
    const readme = read("README.md");
    const section = /^## Supported Node\.js versions$([\s\S]*?)^## /m.exec(readme)?.[1] ?? "";
    assert.match(section, new RegExp(`\\b${ltsVersion?.slice(1).join("\\.")}\\b`), "the README names the exact release CI runs");
    const ci = read(".ci/run");
    assert.match(ci, /^npm test$/m, "the machine's node");
    assert.match(ci, /\bscripts\/node-lts\.sh npm ci\b/, "the LTS gets node_modules of its own ABI");
    assert.match(ci, /^scripts\/node-lts\.sh npm test( --ignore-scripts)?$/m, "the LTS");
  });
});
