import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { agentCommand, renderLaunchdPlist, renderSystemdUnit, windowsQuote, windowsServiceCommands } from "../../src/cli/service/index.js";
import {
  artifactFilename,
  artifactId,
  downloadCommand,
  findTarget,
  releaseTag,
  shellQuote,
  supportedTargets,
} from "../../src/domain/artifact-name.js";
import { ID_PATTERN } from "../../src/protocol/ids.js";
import { clientFiles, sha256Sums } from "../../src/services/client-bundle.js";
import { findOnPath, requireSystem } from "../helpers/system.js";

test("spec §2.2: artifact name svc-client-{goos}-{goarch}-v{version}.zip; spec §9 rule 2: tag v{version}", () => {
  assert.equal(artifactFilename({ goos: "linux", goarch: "amd64" }, "0.1.0"), "svc-client-linux-amd64-v0.1.0.zip");
  assert.equal(artifactFilename({ goos: "windows", goarch: "arm64" }, "1.2.3-rc.1"), "svc-client-windows-arm64-v1.2.3-rc.1.zip");
  assert.equal(releaseTag("0.1.0"), "v0.1.0");
  assert.throws(() => artifactFilename({ goos: "linux", goarch: "amd64" }, "../x"), /unusable version/);
});

test("DESIGN §3: a fixed list of goos/goarch; anything else is no target", () => {
  assert.deepEqual(
    supportedTargets().map((t) => `${t.goos}/${t.goarch}`),
    ["linux/amd64", "linux/arm64", "linux/arm", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"],
  );
  for (const [goos, goarch] of [["darwin", "arm"], ["windows", "arm"], ["plan9", "amd64"], ["Linux", "amd64"], ["linux", "386"], ["linux", ""]] as const) {
    assert.equal(findTarget(goos, goarch), undefined, `${goos}/${goarch}`);
  }
});

test("artifact_id is stable, unique per target and matches the id syntax (DESIGN §3 Ids)", () => {
  assert.equal(artifactId({ goos: "linux", goarch: "amd64" }, "0.1.0"), "art-linux-amd64-v0-1-0");
  const ids = new Set<string>();
  for (const version of ["0.1.0", "1.0.0-RC.1+build.7", "9".repeat(64)]) {
    for (const t of supportedTargets()) {
      const id = artifactId(t, version);
      assert.match(id, ID_PATTERN, id);
      assert.equal(artifactId(t, version), id, "stable");
      ids.add(id);
    }
  }
  assert.equal(ids.size, 3 * supportedTargets().length, "unique");
});

test("shellQuote survives sh word splitting and expansion for hostile words", (t) => {
  if (!requireSystem(t, { binaries: ["sh"] })) return;
  const sh = findOnPath("sh")!;
  for (const word of ["plain.zip", "http://h:8080/a?download_token=x&y=$(id)", "it's", "a b\tc", "`id`", "*", "~", "$HOME", "\"q\"", ""]) {
    const out: string = execFileSync(sh, ["-c", `printf '%s' ${shellQuote(word)}`], { encoding: "utf8" });
    assert.equal(out, word, JSON.stringify(word));
  }
});

test("spec §4 rules 5-6: the copied command is curl -fL -o <file> <url> then unzip -oq <file> -d svc-client, nothing else", () => {
  assert.equal(
    downloadCommand("svc-client-linux-amd64-v0.1.0.zip", "https://github.com/o/r/releases/download/v0.1.0/svc-client-linux-amd64-v0.1.0.zip"),
    "curl -fL -o svc-client-linux-amd64-v0.1.0.zip https://github.com/o/r/releases/download/v0.1.0/svc-client-linux-amd64-v0.1.0.zip && unzip -oq svc-client-linux-amd64-v0.1.0.zip -d svc-client",
  );
  assert.equal(
    downloadCommand("f.zip", "http://127.0.0.1:8080/api/v1/tools/download/client-artifacts/art-x?download_token=abc_-"),
    "curl -fL -o f.zip 'http://127.0.0.1:8080/api/v1/tools/download/client-artifacts/art-x?download_token=abc_-' && unzip -oq f.zip -d svc-client",
  );
});

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

test("DESIGN §3: each zip holds the bundle, the target's launcher and service file, a README and SHA256SUMS", () => {
  const bundle = Buffer.from("console.log('bundle')\n");
  const byName = (goos: "linux" | "darwin" | "windows", goarch: "amd64" | "arm64") =>
    new Map(clientFiles({ goos, goarch }, "0.1.0", bundle).map((f) => [f.name, f]));

  const linux = byName("linux", "amd64");
  assert.deepEqual([...linux.keys()].sort(), ["README.txt", "SHA256SUMS", "service/svc-agent.service", "svcctl", "svcctl.mjs"]);
  assert.equal(linux.get("svcctl")?.executable, true);
  const launcher = linux.get("svcctl")?.data.toString() ?? "";
  assert.match(launcher, /^#!\/bin\/sh\n/);
  assert.ok(launcher.endsWith('exec node "$(dirname "$self")/svcctl.mjs" "$@"\n'), launcher);
  const linuxCommand = agentCommand("/etc/svc-agent", { execPath: "/usr/bin/node", execArgv: [], entry: "/opt/svc-client/svcctl.mjs" });
  assert.equal(linux.get("service/svc-agent.service")?.data.toString(), renderSystemdUnit({ command: linuxCommand }));
  assert.match(linux.get("README.txt")?.data.toString() ?? "", /svc client 0\.1\.0 for linux\/amd64[\s\S]*sha256sum -c SHA256SUMS[\s\S]*svcctl bind/);

  const darwin = byName("darwin", "arm64");
  assert.deepEqual([...darwin.keys()].sort(), ["README.txt", "SHA256SUMS", "service/com.svc.agent.plist", "svcctl", "svcctl.mjs"]);
  const darwinCommand = agentCommand("/Library/Application Support/svc-agent", {
    execPath: "/opt/homebrew/bin/node",
    execArgv: [],
    entry: "/usr/local/svc-client/svcctl.mjs",
  });
  assert.equal(darwin.get("service/com.svc.agent.plist")?.data.toString(), renderLaunchdPlist({ command: darwinCommand }));

  const windows = byName("windows", "amd64");
  assert.deepEqual([...windows.keys()].sort(), ["README.txt", "SHA256SUMS", "service/install-service.cmd", "svcctl.cmd", "svcctl.mjs"]);
  assert.match(windows.get("svcctl.cmd")?.data.toString() ?? "", /^@echo off\r\n.*\r\nnode "%~dp0svcctl\.mjs" %\*\r\n$/);
  const script = windows.get("service/install-service.cmd")?.data.toString() ?? "";
  const windowsCommand = agentCommand("C:\\ProgramData\\svc-agent", {
    execPath: "C:\\Program Files\\nodejs\\node.exe",
    execArgv: [],
    entry: "C:\\Program Files\\svc-client\\svcctl.mjs",
  });
  for (const argv of windowsServiceCommands({ command: windowsCommand })) {
    assert.ok(script.includes(`\r\n${argv.map(windowsQuote).join(" ")}\r\n`), argv.join(" "));
  }

  for (const files of [linux, darwin, windows]) {
    const sums = files.get("SHA256SUMS")?.data.toString() ?? "";
    const others = [...files.values()].filter((f) => f.name !== "SHA256SUMS");
    assert.equal(sums, sha256Sums(others));
    for (const f of others) assert.ok(sums.includes(`${sha(f.data)}  ${f.name}\n`), f.name);
  }
});
