/**
 * What the setup of a dynamic node's host asks, per operating system of the client's targets
 * (`CLIENT_TARGETS`: Linux, macOS, Windows): the prerequisites of the agent (Node.js, and the
 * toolchain of the config's tunnel protocol, spec §6.3 "Toolchains by tunnel_protocol") and the
 * bind command as run from the unpacked client (`svc-client/`), with the rights `svcctl bind`
 * needs to install the agent's system service (spec §5: root, or an elevated Administrator).
 */
import { CLIENT_UNZIP_DIR, type ClientGoos } from "../../../../src/protocol/client-targets.js";
import type { TunnelProtocol } from "../../api/types.js";

/** One thing to do: a sentence, and the command that does it when there is one. */
export interface Step {
  what: string;
  command?: string;
  /** The command's accessible name (defaults to `what`). */
  label?: string;
}

const LINUX_TUNNEL: Record<TunnelProtocol, Step[]> = {
  wireguard: [
    { what: "WireGuard tools (wg, wg-quick) on Debian or Ubuntu:", command: "sudo apt-get install -y wireguard-tools", label: "Install WireGuard tools" },
    { what: "On Fedora or RHEL: sudo dnf install wireguard-tools. On Arch: sudo pacman -S wireguard-tools." },
  ],
  awg_2: [
    {
      what: "AmneziaWG (kernel module and awg, awg-quick) on Ubuntu, from the Amnezia PPA:",
      command: "sudo add-apt-repository -y ppa:amnezia/ppa && sudo apt-get install -y amneziawg",
      label: "Install AmneziaWG",
    },
    { what: "Elsewhere, build amneziawg-tools and the amneziawg kernel module from github.com/amnezia-vpn." },
  ],
};

const MACOS_TUNNEL: Record<TunnelProtocol, Step[]> = {
  wireguard: [{ what: "Node.js and the WireGuard tools with Homebrew:", command: "brew install node wireguard-tools", label: "Install Node.js and WireGuard tools" }],
  awg_2: [
    { what: "Node.js with Homebrew:", command: "brew install node", label: "Install Node.js" },
    { what: "AmneziaWG: build amneziawg-go and amneziawg-tools (awg, awg-quick) from github.com/amnezia-vpn; awg-quick must be on root's PATH." },
  ],
};

const WINDOWS_TUNNEL: Record<TunnelProtocol, Step[]> = {
  wireguard: [{ what: "WireGuard for Windows (wireguard.exe, wg.exe):", command: "winget install --id WireGuard.WireGuard -e", label: "Install WireGuard" }],
  awg_2: [{ what: "AmneziaWG for Windows (amneziawg.exe, awg.exe): the installer from github.com/amnezia-vpn/amneziawg-windows-client/releases." }],
};

/** The prerequisites of each OS for a config of `protocol`. */
export const PREREQUISITES: Record<ClientGoos, (protocol: TunnelProtocol) => Step[]> = {
  linux: (protocol) => [
    {
      what: "Node.js LTS on Debian or Ubuntu (their own nodejs package is often older; check with node --version):",
      command: "curl -fsSL https://deb.nodesource.com/setup_lts.x | sudo -E bash - && sudo apt-get install -y nodejs",
      label: "Install Node.js",
    },
    ...LINUX_TUNNEL[protocol],
  ],
  darwin: (protocol) => MACOS_TUNNEL[protocol],
  windows: (protocol) => [
    { what: "Node.js LTS, in a Command Prompt or PowerShell:", command: "winget install --id OpenJS.NodeJS.LTS -e", label: "Install Node.js" },
    ...WINDOWS_TUNNEL[protocol],
  ],
};

/**
 * The backend's bind command (`svcctl bind --server … --token …`, DESIGN §5) as run on `os`:
 * from the unpacked client, whose launcher is not on the PATH — `sudo ./svcctl` on Linux and
 * macOS (bind installs a system service, which needs root), `svcctl.cmd` in an elevated prompt
 * on Windows.
 */
export function bindCommandFor(os: ClientGoos, command: string): string {
  const args = command.replace(/^svcctl\s+/, "");
  return os === "windows" ? `cd ${CLIENT_UNZIP_DIR} && svcctl.cmd ${args}` : `cd ${CLIENT_UNZIP_DIR} && sudo ./svcctl ${args}`;
}
