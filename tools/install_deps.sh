#!/usr/bin/env bash
# Installs, idempotently, every Debian package the build, the tests, the examples and the
# benchmarks need, and one package from PyPI for the tests (below).
set -euo pipefail
PACKAGES=(
  bazel-bootstrap             # Bazel 4.2.3 (offline, with third_party/bazel stubs)
  g++ clang-format
  libopenblas-dev             # CPU gemm
  libdnnl-dev                 # oneDNN (CPU convolution)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # control plane
  libgloo-dev                 # CPU collectives
  catch2                      # C++ tests
  pybind11-dev python3-dev    # the extension module
  patchelf python3-venv       # wheels (tools/build_wheel.sh) and installing them in a venv
  python3-numpy python3-pytest
  python3-tqdm python3-pil    # the main job's progress bar; PIL images in flowvision's datasets
  python3-torch               # reference results in tests, and the benchmarks
  python3-torchvision         # reference datasets, transforms and models in tests
  python3-sklearn             # ships the UCI digits data the main job trains on
  fortunes                    # English text (fortune-cookie databases) examples/gpt.py trains on
  iproute2 util-linux         # two hosts in network namespaces (tests/python/test_multihost.py)
  openmpi-bin                 # mpirun starting the ranks (tests/python/test_other_launchers.py)
  slurmctld slurmd munge      # a one-node Slurm cluster started by the same tests
  nlohmann-json3-dev          # safetensors headers in the C++ API (oneflow/api/cpp/serialize.cc)
  cmake pkg-config            # what users build against the installed C++ SDK with
  rsync xz-utils file         # tools/gpu/check.sh pack (../shared/gpu/make_bundle.sh)
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "install_deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# PyPI's tensorboard: only the tests' reference reader of SummaryWriter's event files, in a venv
# under ~/.cache (oneflow never imports it). Where PyPI cannot be reached those tests skip.
"$(dirname "${BASH_SOURCE[0]}")/tensorboard_venv.sh" >/dev/null ||
  echo "install_deps: tensorboard (PyPI) not installed; tests/python/test_tensorboard.py skips" >&2
