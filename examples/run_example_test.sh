#!/usr/bin/env bash
# Runs an example binary and passes when it exits 0.
set -euo pipefail
"$1"
