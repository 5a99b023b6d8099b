"""The device the multi-rank scripts put their global tensors on: "cpu", or "cuda" when the test
that launches them sets ONEFLOW_TEST_DEVICE=cuda (a GPU, or without one the stand-in CUDA device,
ONEFLOW_FAKE_CUDA=1: see test_comm.cuda_env). The same checks then run on cuda placements."""

import os

DEVICE = os.environ.get("ONEFLOW_TEST_DEVICE", "cpu")
assert DEVICE in ("cpu", "cuda"), f"ONEFLOW_TEST_DEVICE must be cpu or cuda, got {DEVICE!r}"
