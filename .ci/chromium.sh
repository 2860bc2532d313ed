#!/usr/bin/env bash
# Installs Debian's chromium for the report's screenshot test (test/report.test.ts), which skips with
# its reason when no Chromium is found. Best effort: CI goes on without it, so every failure here is a
# message and exit status 0. Needs root or password-less sudo; the system's apt sources are used.
set -uo pipefail
found=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$found" ]; then
  echo "chromium: already installed ($found)"
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "chromium: not root and no password-less sudo; not installing (the screenshot test will skip)"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "chromium: no apt-get on this machine; not installing (the screenshot test will skip)"
  exit 0
fi
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
if "${as_root[@]}" apt-get -qq update &&
  "${as_root[@]}" apt-get -qq install -y --no-install-recommends chromium >/dev/null; then
  echo "chromium: installed $(chromium --version 2>/dev/null) in $((SECONDS - start)) s"
else
  echo "chromium: apt-get failed after $((SECONDS - start)) s; the screenshot test will skip"
fi
exit 0
