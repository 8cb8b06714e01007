import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { ZipFile } from "yazl";
import { defaultProfileDir } from "../agent/profile.js";
import {
  agentCommand,
  renderLaunchdPlist,
  renderSystemdUnit,
  windowsQuote,
  windowsServiceCommands,
  LAUNCHD_LABEL,
  SYSTEMD_UNIT_NAME,
  WINDOWS_SERVICE_NAME,
} from "../cli/service/index.js";
import { artifactFilename } from "../domain/artifact-name.js";
import { CLIENT_NODE_REQUIREMENT, type ClientTarget } from "../protocol/client-targets.js";

/**
 * The `local_build` client zip (spec §4 rule 4; DESIGN §3 "Client artifact (local_build)"):
 *
 * - `svcctl.mjs`: `src/cli/svcctl.ts` bundled by esbuild into one ESM file (Node.js 20 syntax,
 *   so it runs on every release since; hosts are told {@link CLIENT_NODE_REQUIREMENT}), every
 *   npm dependency included, the client version injected with `define` (spec §9 rule 3);
 * - a launcher: `svcctl` (POSIX sh) on Linux and macOS, `svcctl.cmd` on Windows;
 * - the target's service file under `service/`, rendered by the same renderers `svcctl service
 *   install` uses, for the default install paths below;
 * - `README.txt` (install steps) and `SHA256SUMS` (`sha256sum -c` format, every other file).
 *
 * Entries sit at the zip's root, so `unzip -oq <file> -d svc-client` gives `svc-client/svcctl`.
 */

/**
 * The client CLI's entry in this tree: `src/cli/svcctl.ts` when the service runs from source,
 * the compiled `dist/src/cli/svcctl.js` when it runs from the production build (docs/history/decisions-2026.md "compiled production build");
 * esbuild bundles either.
 */
export const CLIENT_ENTRY = fileURLToPath(new URL(import.meta.url.endsWith(".ts") ? "../cli/svcctl.ts" : "../cli/svcctl.js", import.meta.url));

/** One file of the zip. */
export interface ClientFile {
  /** Path inside the zip, `/`-separated. */
  name: string;
  data: Buffer;
  executable: boolean;
}

/** Where the README and the service files expect things on a target host. */
export interface InstallLayout {
  /** Directory the zip's files are copied to. */
  installDir: string;
  /** Node.js the service file runs (absolute). */
  nodePath: string;
  /** The agent's profile directory (the platform default of `svcctl`). */
  profileDir: string;
}

/**
 * Default install paths per target. The service files are for a manual install: `svcctl bind`
 * writes its own with the Node.js that runs it. On macOS launchd's PATH holds no Node.js, so the
 * Homebrew location of the architecture is written.
 */
export function installLayout(target: ClientTarget): InstallLayout {
  switch (target.goos) {
    case "linux":
      return { installDir: "/opt/svc-client", nodePath: "/usr/bin/node", profileDir: defaultProfileDir("linux") };
    case "darwin":
      return {
        installDir: "/usr/local/svc-client",
        nodePath: target.goarch === "arm64" ? "/opt/homebrew/bin/node" : "/usr/local/bin/node",
        profileDir: defaultProfileDir("darwin"),
      };
    case "windows":
      return {
        installDir: "C:\\Program Files\\svc-client",
        nodePath: "C:\\Program Files\\nodejs\\node.exe",
        profileDir: defaultProfileDir("win32"),
      };
  }
}

/** Top of the bundle: `require` for the CommonJS dependencies esbuild wraps (commander, mqtt, ...). */
function banner(version: string): string {
  return [
    `// svcctl ${version}: the svc client CLI and agent, bundled by the svc service. Needs ${CLIENT_NODE_REQUIREMENT}.`,
    'import { createRequire as __svcCreateRequire } from "node:module";',
    "const require = __svcCreateRequire(import.meta.url);",
  ].join("\n");
}

/**
 * Bundles the client CLI with esbuild (in memory).
 * @param opts.entry `src/cli/svcctl.ts` ({@link CLIENT_ENTRY} by default)
 * @returns the single-file bundle and esbuild's warnings as text
 * @throws esbuild's build failure
 */
export async function bundleClient(opts: { version: string; entry?: string }): Promise<{ code: Buffer; warnings: string[] }> {
  const result = await build({
    entryPoints: [opts.entry ?? CLIENT_ENTRY],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    write: false,
    outfile: "svcctl.mjs",
    define: { "globalThis.__SVC_CLIENT_VERSION__": JSON.stringify(opts.version) },
    banner: { js: banner(opts.version) },
    legalComments: "eof",
    charset: "utf8",
    logLevel: "silent",
  });
  const out = result.outputFiles.find((f) => f.path.endsWith(".mjs"));
  if (out === undefined) throw new Error("esbuild produced no bundle");
  return {
    code: Buffer.from(out.contents),
    warnings: result.warnings.map((w) => `${w.location ? `${w.location.file}:${w.location.line}: ` : ""}${w.text}`),
  };
}

const crlf = (text: string) => text.replace(/\r?\n/g, "\r\n");

/** The service file of the target, for {@link installLayout}'s paths. */
function serviceFile(target: ClientTarget, layout: InstallLayout): ClientFile {
  const isWindows = target.goos === "windows";
  const entry = isWindows ? `${layout.installDir}\\svcctl.mjs` : `${layout.installDir}/svcctl.mjs`;
  const command = agentCommand(layout.profileDir, { execPath: layout.nodePath, execArgv: [], entry });
  switch (target.goos) {
    case "linux":
      return { name: `service/${SYSTEMD_UNIT_NAME}`, data: Buffer.from(renderSystemdUnit({ command })), executable: false };
    case "darwin":
      return { name: `service/${LAUNCHD_LABEL}.plist`, data: Buffer.from(renderLaunchdPlist({ command })), executable: false };
    case "windows": {
      const lines = [
        "@echo off",
        `rem Installs the svc mesh agent as the Windows service ${WINDOWS_SERVICE_NAME} (LocalSystem, automatic start).`,
        "rem Run from an elevated prompt after `svcctl bind --no-service`; `svcctl bind` alone does all of this.",
        `rem Expects the client in ${layout.installDir} and Node.js at ${layout.nodePath}; edit binPath= otherwise.`,
        ...windowsServiceCommands({ command }).map((argv) => argv.map(windowsQuote).join(" ")),
        "",
      ];
      return { name: "service/install-service.cmd", data: Buffer.from(crlf(lines.join("\n"))), executable: false };
    }
  }
}

function launcher(target: ClientTarget): ClientFile {
  if (target.goos === "windows") {
    return {
      name: "svcctl.cmd",
      data: Buffer.from(crlf(["@echo off", `rem svcctl launcher: runs the bundled client with ${CLIENT_NODE_REQUIREMENT}.`, 'node "%~dp0svcctl.mjs" %*', ""].join("\n"))),
      executable: false,
    };
  }
  return {
    name: "svcctl",
    data: Buffer.from(
      [
        "#!/bin/sh",
        `# svcctl launcher: runs the bundled client with ${CLIENT_NODE_REQUIREMENT}.`,
        "# Symbolic links to this file (for example /usr/local/bin/svcctl) are followed to find",
        "# svcctl.mjs beside it.",
        'self="$0"',
        'while [ -L "$self" ]; do',
        '  link="$(readlink "$self")"',
        '  case "$link" in /*) self="$link" ;; *) self="$(dirname "$self")/$link" ;; esac',
        "done",
        'exec node "$(dirname "$self")/svcctl.mjs" "$@"',
        "",
      ].join("\n"),
    ),
    executable: true,
  };
}

/** README install steps 1-4 on Linux and macOS: verify with `verify`, copy, bind as root (what bind does: `binds`), check. */
function unixInstallSteps(layout: InstallLayout, verify: string, bind: string, binds: string[]): string[] {
  return [
    "Install (in the svc-client directory the download command unzipped into)",
    `  1. Verify the files:        ${verify}`,
    `  2. Copy them into place:    sudo mkdir -p ${layout.installDir} && sudo cp -R . ${layout.installDir}`,
    `     and put svcctl on PATH:  sudo ln -sf ${layout.installDir}/svcctl /usr/local/bin/svcctl`,
    "  3. In the console, open the dynamic node and copy its bind command (valid 5 minutes, usable once).",
    `     Run it as root:          sudo svcctl bind ${bind}`,
    ...binds,
    "  4. Check:                   sudo svcctl status",
  ];
}

function readme(target: ClientTarget, version: string, layout: InstallLayout, service: ClientFile): string {
  const rows: Array<[string, string]> = [
    ["svcctl.mjs", "the client CLI and agent"],
    target.goos === "windows" ? ["svcctl.cmd", "launcher: svcctl.cmd <command>"] : ["svcctl", "launcher (sh): ./svcctl <command>"],
    [service.name, "the agent's system service, for a manual install (svcctl bind installs it for you)"],
    ["README.txt", "this file"],
    ["SHA256SUMS", "SHA-256 of every other file"],
  ];
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  const head = [
    `svc client ${version} for ${target.goos}/${target.goarch}`,
    "",
    "The client CLI (svcctl) and the agent of the svc device-mesh service, as one JavaScript file.",
    target.goos === "windows"
      ? `It needs ${CLIENT_NODE_REQUIREMENT} on the host (https://nodejs.org), on PATH: the launcher runs \`node\`.`
      : `It needs ${CLIENT_NODE_REQUIREMENT} on the host (https://nodejs.org), on root's PATH: the launcher runs \`node\`.`,
    "",
    "Files",
    ...rows.map(([name, what]) => `  ${name.padEnd(width)}${what}`),
    "",
  ];
  const bind = "--server <BASE_URL> --token <TOKEN>";
  switch (target.goos) {
    case "linux":
      return [
        ...head,
        ...unixInstallSteps(layout, "sha256sum -c SHA256SUMS", bind, [
          `     It stores the profile in ${layout.profileDir} (mode 0600) and installs and starts`,
          `     ${SYSTEMD_UNIT_NAME} (systemd, as root).`,
        ]),
        "",
        "Manual service install (after `svcctl bind --no-service`)",
        `  ${service.name} runs ${layout.nodePath}; edit ExecStart if \`command -v node\` says otherwise.`,
        `  sudo cp ${service.name} /etc/systemd/system/ && sudo systemctl daemon-reload && sudo systemctl enable --now ${SYSTEMD_UNIT_NAME}`,
        "",
        "Remove: sudo svcctl service uninstall",
        "",
      ].join("\n");
    case "darwin":
      return [
        ...head,
        ...unixInstallSteps(layout, "shasum -a 256 -c SHA256SUMS", bind, [
          `     It stores the profile in "${layout.profileDir}" (mode 0600) and loads`,
          `     the LaunchDaemon ${LAUNCHD_LABEL} (as root).`,
        ]),
        "",
        "Manual service install (after `svcctl bind --no-service`)",
        `  ${service.name} runs ${layout.nodePath}; edit ProgramArguments if \`command -v node\` says otherwise.`,
        `  sudo cp ${service.name} /Library/LaunchDaemons/ && sudo launchctl bootstrap system /Library/LaunchDaemons/${LAUNCHD_LABEL}.plist`,
        "",
        "Remove: sudo svcctl service uninstall",
        "",
      ].join("\n");
    case "windows":
      return crlf(
        [
          ...head,
          "Install (from an elevated PowerShell or Command Prompt)",
          "  1. Verify the files: compare `Get-FileHash -Algorithm SHA256 <file>` with SHA256SUMS.",
          `  2. Copy them into "${layout.installDir}".`,
          "  3. In the console, open the dynamic node and copy its bind command (valid 5 minutes, usable once).",
          `     Run it from an elevated Command Prompt in "${layout.installDir}" (svcctl.cmd is found there):`,
          `       svcctl bind ${bind}`,
          `     It stores the profile in ${layout.profileDir} (SYSTEM and Administrators only) and`,
          `     installs and starts the service ${WINDOWS_SERVICE_NAME} (LocalSystem).`,
          `  4. Check:                   "${layout.installDir}\\svcctl.cmd" status`,
          "",
          "Manual service install (after `svcctl bind --no-service`)",
          `  ${service.name.replace(/\//g, "\\")} runs the sc.exe commands; it expects Node.js at ${layout.nodePath}.`,
          "",
          `Remove: "${layout.installDir}\\svcctl.cmd" service uninstall`,
          "",
        ].join("\n"),
      );
  }
}

/** `sha256sum` check-file text: `<hex>  <name>` per file, sorted by name. */
export function sha256Sums(files: readonly ClientFile[]): string {
  return [...files]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((f) => `${createHash("sha256").update(f.data).digest("hex")}  ${f.name}\n`)
    .join("");
}

/** Every file of the zip for `target` around an already built bundle (pure). */
export function clientFiles(target: ClientTarget, version: string, bundle: Buffer): ClientFile[] {
  const layout = installLayout(target);
  const service = serviceFile(target, layout);
  const files: ClientFile[] = [
    { name: "svcctl.mjs", data: bundle, executable: false },
    launcher(target),
    service,
    { name: "README.txt", data: Buffer.from(readme(target, version, layout, service)), executable: false },
  ];
  files.push({ name: "SHA256SUMS", data: Buffer.from(sha256Sums(files)), executable: false });
  return files;
}

/** A zip of `files` (deflated; Unix modes 0644, or 0755 for executables). */
export async function zipFiles(files: readonly ClientFile[], mtime: Date): Promise<Buffer> {
  const zip = new ZipFile();
  for (const f of files) zip.addBuffer(f.data, f.name, { mtime, mode: f.executable ? 0o100755 : 0o100644 });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

/** The finished zip of one target. */
export interface ClientZip {
  filename: string;
  zip: Buffer;
  /** Names of the files inside. */
  files: string[];
  warnings: string[];
}

/**
 * Builds the whole `local_build` zip of `target` at `version` in memory.
 * @throws esbuild's build failure
 */
export async function buildClientZip(opts: { target: ClientTarget; version: string; mtime: Date; entry?: string }): Promise<ClientZip> {
  const { code, warnings } = await bundleClient({ version: opts.version, ...(opts.entry === undefined ? {} : { entry: opts.entry }) });
  const files = clientFiles(opts.target, opts.version, code);
  return {
    filename: artifactFilename(opts.target, opts.version),
    zip: await zipFiles(files, opts.mtime),
    files: files.map((f) => f.name),
    warnings,
  };
}
