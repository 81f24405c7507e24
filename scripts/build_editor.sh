#!/usr/bin/env bash
# Build the flow editor (frontend/: CodeMirror 6 from npm, pinned by package-lock.json) into
# falai_django/static/falai_django/flow_editor.js. The built file is committed, so installing
# the app needs no Node.js; rebuild after changing frontend/ (a test checks the digest).
# Usage: bash scripts/build_editor.sh [output-dir]
set -euo pipefail
cd "$(dirname "$0")/../frontend"
command -v npm >/dev/null || { echo "build_editor: npm is not installed (Node.js 18+ is needed to build the editor)" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
node build.mjs "$@"
