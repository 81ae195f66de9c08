#!/usr/bin/env bash
# Installs the noida-db 0.2.3 binary (one small server speaking several wire protocols, Kafka among them: API
# versions 0-13, never creates fetch sessions, answers fetches at once) for fetchtool's tests and captures.
# Why this route: PyPI's noida-db 0.2.3 wheel carries the x86-64 binary at noida_db/noida-db.
#
# Usage:  tools/install_noida.sh [DEST]     (default DEST: /opt/noida-db/noida-db)
# Env:    NOIDA_CACHE   where the wheel is downloaded (default: DIR-of-DEST/cache)
#         PYTHON        the interpreter whose pip downloads the wheel (default: python3)
# Result: an executable DEST; the script prints its path on stdout. Point FETCHTOOL_NOIDA at it.
# Idempotent: if DEST already runs and reports noida-db 0.2.3, nothing is downloaded.
# On Debian 12 the binary prints "weak version `GLIBC_2.39' not found" on stderr and runs all the same.
set -euo pipefail

dest=${1:-/opt/noida-db/noida-db}
want="noida-db 0.2.3"
python=${PYTHON:-python3}
# sha256 of noida_db-0.2.3-py3-none-manylinux_2_17_x86_64.whl on PyPI; pip refuses any other file.
wheel_sha256=40a2fb15567e3d344e7483df62bb439e7d64ac6fb232f4f223554aed58204f82

mkdir -p "$(dirname "$dest")"
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")

version() { "$1" version 2>/dev/null | head -n 1; }
if [ -x "$dest" ] && [ "$(version "$dest")" = "$want" ]; then
  echo "install_noida.sh: $dest is already $want" >&2
  echo "$dest"; exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "install_noida.sh: the bundled noida-db binary is x86-64 only (this is $(uname -m))" >&2; exit 1; }

"$python" -m pip --version >/dev/null 2>&1 || {
  echo "install_noida.sh: '$python -m pip' does not work; set PYTHON to an interpreter with pip (e.g. a venv's)" >&2; exit 1; }
cache=${NOIDA_CACHE:-$(dirname "$dest")/cache}
mkdir -p "$cache"
req=$cache/requirements.txt
echo "noida-db==0.2.3 --hash=sha256:$wheel_sha256" >"$req"
"$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: -d "$cache" -r "$req"
wheel=$cache/noida_db-0.2.3-py3-none-manylinux_2_17_x86_64.whl
[ -f "$wheel" ] || { echo "install_noida.sh: pip did not produce $wheel" >&2; exit 1; }

# Extract only the binary (Python's zipfile: `unzip` is not needed) and move it into place atomically.
"$python" - "$wheel" "$dest.new" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl, whl.open("noida_db/noida-db") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod 0755 "$dest.new"
got=$(version "$dest.new" || true)
[ "$got" = "$want" ] || { rm -f "$dest.new"; echo "install_noida.sh: extracted binary reports '$got', expected '$want'" >&2; exit 1; }
mv -f "$dest.new" "$dest"
echo "install_noida.sh: installed $want at $dest" >&2
echo "$dest"
