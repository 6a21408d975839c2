#!/usr/bin/env bash
# Installs headless Chromium for the report's browser test (results: TestReportInBrowser), which
# is skipped without it. Separate from install-deps.sh: lockpick itself runs without a browser.
set -euo pipefail
for b in chromium chromium-browser google-chrome; do
	command -v "$b" >/dev/null 2>&1 && exit 0
done
if [ "$(id -u)" -ne 0 ]; then
	echo "the report's browser test needs chromium. Install it with: sudo apt-get install -y chromium" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "the report's browser test needs chromium, and this machine has no apt-get: install it with your package manager" >&2
	exit 1
fi
echo "installing chromium with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
