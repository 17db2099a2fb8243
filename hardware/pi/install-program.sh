#!/usr/bin/env bash
# Installs the gateway's program from a checkout into a folder (install.sh runs it as root for
# /opt/sensor-gateway):  bash hardware/pi/install-program.sh <checkout> <folder>
# Copies what the gateway needs (its code, the shared wire code, the package files, the docs), then
# installs the run-time packages with npm: without the project's build scripts, which live in the
# checkout's scripts/ and build the cloud's web pages, and then with the install scripts of the
# packages that carry a compiled addon (better-sqlite3, the serial port bindings) and of esbuild
# (tsx's compiler), which fetch or build what this machine runs.
set -euo pipefail
SRC="$(cd "$1" && pwd)"
APP="$2"

install -d "$APP"
rsync -a --delete --exclude node_modules --exclude data --exclude .git \
  "$SRC/package.json" "$SRC/package-lock.json" "$SRC/tsconfig.json" \
  "$SRC/gateway" "$SRC/shared" "$SRC/hardware" "$SRC/docs" "$APP/"
(cd "$APP" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund &&
  npm rebuild better-sqlite3 @serialport/bindings-cpp esbuild --no-audit --no-fund)
cat > "$APP/run-gateway" <<'RUN'
#!/bin/sh
# Starts the gateway as `npm run gateway -- "$@"` does (--check probes everything, --validate only the file).
cd "$(dirname "$(readlink -f "$0")")" && exec node --max-old-space-size=64 --max-semi-space-size=2 --import tsx gateway/src/main.ts "$@"
RUN
chmod 0755 "$APP/run-gateway"
