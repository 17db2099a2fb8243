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
# Build tools for the native modules, and rsync for the copy.
apt-get install -y -qq --no-install-recommends build-essential python3 ca-certificates rsync >/dev/null
# Node.js: the one installed (NodeSource's nodejs carries its npm and conflicts with Debian's npm
# package), else Debian's, which must be 20 or newer (bookworm ships 18: install Node.js 20 from
# NodeSource or Debian backports first).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
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
bash "$SRC/hardware/pi/install-program.sh" "$SRC" "$APP"

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
