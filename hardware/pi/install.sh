#!/usr/bin/env bash
# Installs the sensor gateway on a Raspberry Pi (Raspberry Pi OS / Debian, arm64 or armhf).
# Run from a checkout of the project:  sudo bash hardware/pi/install.sh
# Idempotent: running it again updates the program and keeps the configuration and the buffer.
set -euo pipefail

APP=/opt/sensor-gateway
ETC=/etc/sensor-gateway
DATA=/var/lib/sensor-gateway
SRC="$(cd "$(dirname "$0")/../.." && pwd)"

if [ "$(id -u)" -ne 0 ]; then echo "run as root (sudo)"; exit 1; fi

echo "== packages"
apt-get update -qq
# Node.js 20 or newer from Debian (bookworm ships 18: use the NodeSource or Debian backports
# package when `node --version` is older than 20). Build tools for the native modules.
apt-get install -y -qq --no-install-recommends nodejs npm build-essential python3 ca-certificates >/dev/null
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "Node.js $(node --version) is too old: install Node.js 20 or newer, then run this again"; exit 1
fi

echo "== user and folders"
id sensor-gateway >/dev/null 2>&1 || useradd --system --home-dir "$DATA" --shell /usr/sbin/nologin sensor-gateway
usermod -a -G dialout sensor-gateway
install -d -o sensor-gateway -g sensor-gateway -m 0750 "$DATA"
install -d -o root -g sensor-gateway -m 0750 "$ETC"

echo "== program in $APP"
install -d "$APP"
# Only what the gateway needs: its code, the shared wire code and the package files.
rsync -a --delete --exclude node_modules --exclude data --exclude .git \
  "$SRC/package.json" "$SRC/package-lock.json" "$SRC/tsconfig.json" \
  "$SRC/gateway" "$SRC/shared" "$SRC/hardware" "$SRC/docs" "$APP/"
(cd "$APP" && npm ci --omit=dev --no-audit --no-fund)
cat > "$APP/run-gateway" <<'RUN'
#!/bin/sh
# Starts the gateway as `npm run gateway -- "$@"` does (--check probes everything, --validate only the file).
cd /opt/sensor-gateway && exec node --max-old-space-size=64 --max-semi-space-size=2 --import tsx gateway/src/main.ts "$@"
RUN
chmod 0755 "$APP/run-gateway"

echo "== configuration in $ETC"
if [ ! -f "$ETC/gateway.yaml" ]; then
  install -o root -g sensor-gateway -m 0640 "$SRC/hardware/pi/gateway.example.yaml" "$ETC/gateway.yaml"
  echo "   wrote $ETC/gateway.yaml from the example: edit it"
fi
if [ ! -f "$ETC/bridge.json" ]; then
  echo "   save the bundle of POST /v1/bridges as $ETC/bridge.json (mode 0640, group sensor-gateway)"
fi

echo "== service"
install -m 0644 "$SRC/hardware/pi/sensor-gateway.service" /etc/systemd/system/sensor-gateway.service
systemctl daemon-reload
systemctl enable sensor-gateway.service
if [ -f "$ETC/bridge.json" ]; then
  systemctl restart sensor-gateway.service
  echo "   started; follow it with: journalctl -u sensor-gateway -f"
else
  echo "   enabled; start it once the bundle is in place: systemctl start sensor-gateway"
fi
echo "== check: $APP/run-gateway --config $ETC/gateway.yaml --check"
