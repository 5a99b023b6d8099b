#!/usr/bin/env bash
# PyPI's tensorboard (the event-file reader the tests check SummaryWriter's files with) in a
# virtual environment of Debian's python3, created once; prints that environment's python.
#   tools/tensorboard_venv.sh            # -> ~/.cache/oneflow_tensorboard_venv/bin/python
# Nothing of it is imported by oneflow: SummaryWriter writes the files without TensorFlow or
# tensorboard. Exits 3 (with one line) when PyPI cannot be reached.
set -euo pipefail
VENV="${ONEFLOW_TENSORBOARD_VENV:-$HOME/.cache/oneflow_tensorboard_venv}"
PY="$VENV/bin/python"
if [[ -x "$PY" ]] && "$PY" -c "import tensorboard.backend.event_processing.event_accumulator" 2>/dev/null; then
  echo "$PY"
  exit 0
fi
/usr/bin/python3 -m venv "$VENV" >&2
if ! "$PY" -m pip install -q --disable-pip-version-check "tensorboard>=2.10" >&2; then
  echo "tensorboard_venv: could not install tensorboard from PyPI into $VENV" >&2
  exit 3
fi
echo "$PY"
