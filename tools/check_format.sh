#!/usr/bin/env bash
# Fails (naming the files) when a tracked C++ source differs from what clang-format makes of it
# under .clang-format (Google style, 100 columns). Fix with:
#   git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/' | xargs clang-format -i
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^third_party/')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) not clang-formatted: ${bad[*]}" >&2
  echo "check_format: run clang-format -i on them (see tools/check_format.sh)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} C++ files clang-formatted"
