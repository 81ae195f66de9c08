#!/usr/bin/env bash
# Installs tshark 4.4 (from Debian trixie) into a chroot and writes a wrapper that runs it.
# Why: Debian 12's tshark 4.0 decodes Kafka Fetch only up to v11 and prints wrong session fields for v12+;
# tshark 4.4 decodes Fetch v0-v16, so the decoder's differential tests need it.
#
# Usage:  tools/install_tshark44.sh [DIR]     (default DIR: /opt/tshark44; needs root; ~45 s and ~600 MB)
# Result: DIR/tshark, a wrapper; the script prints its path on stdout (version on stderr).
#         DIR/tshark -r capture.pcap -d tcp.port==9092,kafka -Y kafka -T fields -e kafka.api_version
# Idempotent: an existing chroot with tshark in it is reused; the wrapper is rewritten every run.
# The wrapper hard-links (or copies) each `-r FILE` into DIR/root/data for the run and removes it afterwards,
# so pass readable host paths; it runs `chroot`, so its callers must be root too.
set -euo pipefail

dir=${1:-/opt/tshark44}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "install_tshark44.sh: needs root (debootstrap and chroot)" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root

if [ ! -x "$root/usr/bin/tshark" ]; then
  if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  # Build in a scratch dir and move it into place only when complete, so an interrupted run is simply redone.
  tmp=$dir/root.partial
  rm -rf "$tmp"
  mkdir -p "$tmp"
  echo "install_tshark44.sh: debootstrap trixie minbase into $tmp (log: $dir/debootstrap.log)" >&2
  if ! debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$dir/debootstrap.log" 2>&1; then
    tail -20 "$dir/debootstrap.log" >&2; exit 1
  fi
  # No recommends: keeps the chroot lean (no GUI libraries); tshark alone is all the tests use.
  if ! chroot "$tmp" bash -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tshark' \
       >"$dir/apt.log" 2>&1; then
    tail -20 "$dir/apt.log" >&2; exit 1
  fi
  chroot "$tmp" apt-get clean
  rm -rf "$root"
  mv "$tmp" "$root"
fi
mkdir -p "$root/data"

# Write the wrapper to a temp file and rename it, so concurrent callers never see a half-written script.
cat >"$dir/tshark.new" <<WRAP
#!/usr/bin/env bash
# tshark 4.4 from the chroot at $root (made by fetchtool's tools/install_tshark44.sh).
# Every argument after -r is a host path to a capture; it is linked into the chroot for this run only.
set -euo pipefail
args=() links=()
cleanup() { [ \${#links[@]} -eq 0 ] || rm -f "\${links[@]}"; }
trap cleanup EXIT
n=0
while [ \$# -gt 0 ]; do
  if [ "\$1" = "-r" ] && [ \$# -ge 2 ] && [ "\$2" != "-" ]; then
    src=\$(readlink -f -- "\$2")
    [ -r "\$src" ] || { echo "tshark44: cannot read \$2" >&2; exit 2; }
    n=\$((n + 1)); name=\$\$-\$n-\$(basename -- "\$src")
    ln -f -- "\$src" "$root/data/\$name" 2>/dev/null || cp -f -- "\$src" "$root/data/\$name"
    links+=("$root/data/\$name"); args+=("-r" "/data/\$name"); shift 2
  else args+=("\$1"); shift; fi
done
set +e
chroot "$root" tshark "\${args[@]}"
rc=\$?
exit \$rc
WRAP
chmod +x "$dir/tshark.new"
mv -f "$dir/tshark.new" "$dir/tshark"

"$dir/tshark" --version | head -1 >&2
echo "$dir/tshark"
