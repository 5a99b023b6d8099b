#!/usr/bin/env bash
# Builds and runs the host stand-in's tests (tests/cuda_host/*_test.cc: CUDA kernel headers as
# host C++, one host thread per CUDA thread, tests/cuda_host/standin.h) under ThreadSanitizer and
# under AddressSanitizer + UndefinedBehaviorSanitizer, then shows that the sanitizers catch what
# they must: a missing __syncthreads (TSan data race) and a shared memory overrun (ASan).
# Each test compiles alone with headers only (no core library): seconds per sanitizer. Catch's
# main is compiled once and kept in ~/.cache/oneflow_cuda_host.
#
#   tools/cuda_host/check.sh            # every tests/cuda_host/*_test.cc
#   tools/cuda_host/check.sh softmax    # tests/cuda_host/softmax_test.cc only
#   CUDA_HOST_SANITIZERS=tsan tools/cuda_host/check.sh softmax "[tail]"   # Catch test spec
# Exit status 0 = green; prints "cuda_host: SKIPPED: <why>" without the CUDA toolkit's headers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
CUDA_INC="${CUDA_PATH:-/usr/local/cuda}/include"
if [[ ! -f "$CUDA_INC/cuda_fp16.h" ]]; then
  echo "cuda_host: SKIPPED: no CUDA headers ($CUDA_INC/cuda_fp16.h): the stand-in takes half and" \
    "bfloat16 from the toolkit"
  exit 0
fi
CXX="${CXX:-g++}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/oneflow_cuda_host"
mkdir -p "$CACHE"
start=$SECONDS

# Catch's main, uninstrumented (linking it into sanitizer builds is fine), keyed by compiler and
# Catch's header.
key="$( (
  "$CXX" --version
  cat /usr/include/catch2/catch.hpp tests/cuda_host/catch_main.cc
) | sha1sum | cut -c1-12)"
main_o="$CACHE/catch_main.$key.o"
if [[ ! -f "$main_o" ]]; then
  echo "cuda_host: compiling Catch's main once ($main_o)"
  "$CXX" -std=c++17 -O0 -c tests/cuda_host/catch_main.cc -o "$main_o.tmp.$$"
  mv "$main_o.tmp.$$" "$main_o"
fi

filter="${1:-}"
spec="${2:-}"
if [[ -n "$filter" ]]; then
  tests=("tests/cuda_host/${filter%_test.cc}_test.cc")
  [[ -f "${tests[0]}" ]] || { echo "cuda_host: no ${tests[0]}" >&2; exit 1; }
else
  mapfile -t tests < <(ls tests/cuda_host/*_test.cc)
fi
read -r -a sanitizers <<<"${CUDA_HOST_SANITIZERS:-tsan asan}"
# -ffp-contract=off: __fmul_rn/__dadd_rn and friends must not fuse into an fma, as on the GPU.
COMMON=(-std=c++17 -O1 -g1 -fno-omit-frame-pointer -ffp-contract=off -DONEFLOW_CUDA_HOST_STANDIN -I. -isystem
  "$CUDA_INC" -Wall -Wno-unknown-pragmas -pthread)
declare -A FLAGS=(
  [tsan]="-fsanitize=thread"
  [asan]="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
)
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

bin() { echo "$CACHE/$(basename "$1" .cc).$2"; }
build() {  # test.cc sanitizer
  # shellcheck disable=SC2086
  "$CXX" "${COMMON[@]}" ${FLAGS[$2]} "$1" "$main_o" -o "$(bin "$1" "$2")"
}

# Builds in parallel (one per core), then runs in turn.
jobs="${CUDA_HOST_JOBS:-$(nproc)}"
pids=()
for t in "${tests[@]}"; do
  for s in "${sanitizers[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
    (build "$t" "$s" 2>"$(bin "$t" "$s").log" || rm -f "$(bin "$t" "$s")") &
    pids+=($!)
  done
done
wait "${pids[@]}" 2>/dev/null || true
echo "cuda_host: built ${#tests[@]} file(s) x ${#sanitizers[@]} sanitizer(s) in $((SECONDS - start)) s"

failed=()
for t in "${tests[@]}"; do
  for s in "${sanitizers[@]}"; do
    t0=$SECONDS
    if [[ ! -x "$(bin "$t" "$s")" ]]; then
      cat "$(bin "$t" "$s").log"
      failed+=("$t [$s build]")
      continue
    fi
    args=()
    [[ -n "$spec" ]] && args=("$spec")
    if "$(bin "$t" "$s")" "${args[@]}" >"$CACHE/last.log" 2>&1; then
      echo "cuda_host: $t [$s] passed ($(tail -n 2 "$CACHE/last.log" | head -n 1 | tr -s ' '), $((SECONDS - t0)) s)"
    else
      cat "$CACHE/last.log"
      failed+=("$t [$s]")
    fi
  done
done

# The sanitizers must catch the stand-in's broken-on-purpose kernels.
expect() {  # binary tag pattern what
  if "$1" "$2" >"$CACHE/last.log" 2>&1; then
    echo "cuda_host: $2 passed, expected $4" >&2
    failed+=("$2")
  elif ! grep -q "$3" "$CACHE/last.log"; then
    cat "$CACHE/last.log"
    echo "cuda_host: $2 failed without $4" >&2
    failed+=("$2")
  else
    echo "cuda_host: $2 fails as it must ($4: $(grep -m1 "$3" "$CACHE/last.log" | tr -s ' '))"
  fi
}
if [[ -z "$filter" || "$filter" == standin* ]]; then
  st=tests/cuda_host/standin_test.cc
  for s in "${sanitizers[@]}"; do
    case $s in
      tsan) expect "$(bin $st tsan)" "[.race]" "SUMMARY: ThreadSanitizer: data race.*ReverseKernel" \
        "a missing __syncthreads reported by ThreadSanitizer" ;;
      asan) expect "$(bin $st asan)" "[.overrun]" "ERROR: AddressSanitizer: heap-buffer-overflow" \
        "a shared memory overrun reported by AddressSanitizer" ;;
    esac
  done
fi

if ((${#failed[@]})); then
  echo "cuda_host: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "cuda_host: ${#tests[@]} test file(s) green under ${sanitizers[*]} in $((SECONDS - start)) s"
