#!/usr/bin/env bash
# Puts an NVRTC in .cache/nvrtc for the kernel compile tests on machines without the CUDA toolkit's
# NVRTC (CI: no GPU, no NVIDIA libraries). NVRTC needs no GPU. Source: Debian's non-free libnvrtc12
# (CUDA 12.4, supports sm_90a), fetched with a private apt configuration: the system's sources and
# package state are left alone. The CUDA headers come from the machine (/usr/local/cuda/include).
set -euo pipefail
dest=${1:-"$(cd "$(dirname "$0")/.." && pwd)/.cache/nvrtc"}
if compgen -G "$dest/libnvrtc.so.*" >/dev/null; then echo "nvrtc: already in $dest"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie non-free" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives" -o "APT::Sandbox::User=root"
  -o "Debug::NoLocking=1")
apt-get "${apt_opts[@]}" -qq update
builtins=$(apt-cache "${apt_opts[@]}" depends libnvrtc12 | sed -n 's/.*Depends: \(libnvrtc-builtins[0-9.]*\).*/\1/p' | head -n1)
(cd "$work" && apt-get "${apt_opts[@]}" -qq download libnvrtc12 "$builtins")
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
mkdir -p "$dest"
cp -a "$work"/root/usr/lib/*-linux-gnu/libnvrtc* "$dest/"
echo "nvrtc: $(cd "$dest" && ls libnvrtc.so.* | tr "\n" " ")in $dest"
