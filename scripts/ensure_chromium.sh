#!/usr/bin/env bash
# Make sure a Chromium is installed for the UI test (tests/ui), which drives
# the Dagster web UI headless. Debian's package puts it at /usr/bin/chromium.
set -euo pipefail

die() {
    echo "ensure_chromium: $*" >&2
    exit 1
}

for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
        echo "ensure_chromium: $("$candidate" --version 2>/dev/null | head -n 1)"
        exit 0
    fi
done

echo "ensure_chromium: no Chromium on PATH; installing Debian's chromium" >&2
command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install Chromium and put it on PATH"
if [[ $(id -u) -eq 0 ]]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
else
    die "need root to install chromium and sudo is not installed"
fi
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
command -v chromium >/dev/null 2>&1 || die "chromium installed but not on PATH"
echo "ensure_chromium: $(chromium --version 2>/dev/null | head -n 1)"
