#!/usr/bin/env bash
# OneFlow's own global-tensor tests (../shared/oneflow_upstream/, upstream files unmodified) against
# our package on CPU ranks, each test in a fresh job at the rank count its decorator asks for.
# Prints pass / fail / error / hang / skip per test and a summary line. Options: see
# tools/oneflow_tests.py (-k WORD, --timeout S, --logdir DIR, file-name words).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Build once (tools/python rebuilds when a C++ source changed); then run without re-checking,
# so a build started by someone else mid-run does not change the module under the suite.
"$ROOT/tools/python" -c "import oneflow" >/dev/null
export PYTHONPATH="$ROOT/oneflow/python${PYTHONPATH:+:$PYTHONPATH}"
exec /usr/bin/python3 "$ROOT/tools/oneflow_tests.py" "$@"
