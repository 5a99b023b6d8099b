#!/usr/bin/env bash
# tools/op_facets names the file:line of every facet of an op, and fails on an unknown op.
set -euo pipefail
BIN="$1"
out="$("$BIN" softmax)"
echo "$out"
expect() {
  grep -Eq "$1" <<<"$out" || { echo "op_facets_test: no line matching '$1'" >&2; exit 1; }
}
expect '^softmax$'
expect '^  definition  core/ops/.+\.cc:[0-9]+$'
expect '^  gradient    core/.+\.cc:[0-9]+$'
expect '^  cpu kernel  core/.+\.cc:[0-9]+$'
expect '^  cuda kernel (core/.+\.cu:[0-9]+|\(none\))$'
expect '^  sbp rule    sbp/rules/nn\.cc:[0-9]+$'
expect '^  samples     tests/op_samples\.cc:[0-9]+'
out="$("$BIN" nll_loss)"
grep -q 'rewritten into other global ops' <<<"$out" || { echo "nll_loss: no rewrite named" >&2; exit 1; }
out="$("$BIN" dropout_mask)"
grep -q 'lowered per rank' <<<"$out" || { echo "dropout_mask: no lowering named" >&2; exit 1; }
if "$BIN" no_such_op 2>/dev/null; then echo "op_facets_test: an unknown op must fail" >&2; exit 1; fi
[[ "$("$BIN" | wc -l)" -gt 100 ]] || { echo "op_facets_test: the listing of every op is short" >&2; exit 1; }
echo "op_facets_test: ok"
