#!/usr/bin/env bash
# Installs Debian's Chromium for the HTML report's browser tests (tests/reports: the page is opened headless).
#
# Usage:  tools/install_chromium.sh     (as root, or with sudo available)
# Result: /usr/bin/chromium; the script prints its path on stdout (version on stderr).
# Idempotent: if /usr/bin/chromium already runs, nothing is installed.
set -euo pipefail

path=/usr/bin/chromium
if [ -x "$path" ] && "$path" --version >/dev/null 2>&1; then
  echo "install_chromium.sh: $("$path" --version 2>/dev/null)" >&2
  echo "$path"; exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Recommends bring fonts; without any font the page's text (and the charts' axes) would not render.
$sudo apt-get install -y -qq chromium >/dev/null
"$path" --version >&2
echo "$path"
