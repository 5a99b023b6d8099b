#!/usr/bin/env bash
# Builds a wheel of the Python package for one CPython (3.10 to 3.13, with its headers):
#   tools/build_wheel.sh                      # Debian's /usr/bin/python3
#   tools/build_wheel.sh --python /root/.pyenv/versions/3.12.1/bin/python3
#   pip install dist/oneflow-*-cp312-*.whl
# The wheel holds oneflow (with mock_torch and the launcher), flowvision, the extension and the
# shared libraries it needs beyond glibc and libstdc++ (tools/wheel.py). Prints the wheel's path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON=/usr/bin/python3
OUT="$ROOT/dist"
while (($#)); do
  case "$1" in
    --python) PYTHON="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "build_wheel: unknown argument $1 (expected --python PATH, --out DIR)" >&2; exit 2 ;;
  esac
done
read -r VERSION INCLUDE < <("$PYTHON" -c 'import sys, sysconfig
print("%d.%d" % sys.version_info[:2], sysconfig.get_paths()["include"])') || {
  echo "build_wheel: cannot run $PYTHON" >&2
  exit 2
}
case "$VERSION" in
  3.10 | 3.11 | 3.12 | 3.13) ;;
  *) echo "build_wheel: $PYTHON is Python $VERSION; wheels are built for 3.10 to 3.13" >&2; exit 2 ;;
esac
if [[ ! -f "$INCLUDE/Python.h" ]]; then
  echo "build_wheel: $PYTHON has no headers ($INCLUDE/Python.h is missing; install its -dev package)" >&2
  exit 2
fi
"$ROOT/tools/install_deps.sh"
cd "$ROOT"
# Any CPython 3.11 uses the extension tools/python uses (one ABI within a minor version);
# another compiles only the extension's own sources again, against its headers.
if [[ "$VERSION" == 3.11 ]]; then
  TARGET=_oneflow_internal.so
  bazel build "//oneflow:$TARGET" >&2
else
  TARGET=_oneflow_internal_wheel.so
  bazel build "//oneflow:$TARGET" "--repo_env=ONEFLOW_WHEEL_PYTHON=$PYTHON" >&2
fi
exec /usr/bin/python3 "$ROOT/tools/wheel.py" --python "$PYTHON" \
  --extension "$ROOT/bazel-bin/oneflow/$TARGET" --out "$OUT"
