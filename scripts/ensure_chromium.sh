#!/usr/bin/env bash
# Browser tests drive Debian's Chromium (/usr/bin/chromium) through Playwright; Playwright's own
# browser download cannot run here. Install the Debian package when it is missing and we can.
set -u
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: installing Debian's chromium package (browser tests need it)" >&2
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || true
fi
[ -x /usr/bin/chromium ] || { echo "ensure_chromium: /usr/bin/chromium is NOT available; browser tests will skip (fail under CI=true)" >&2; exit 1; }
