"""Run on 4 ranks by test_big_models.py: examples/gpt.py's model (scaled by the arguments
given to this script) created under --parallel tp / dp_tp / zero, directly with its layout and
on meta then placed; gpt.py prints each rank's creation peak against its shard."""

import gc
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples"))
import gpt  # noqa: E402

import oneflow as flow  # noqa: E402

world = flow.env.get_world_size()
for parallel in ("tp", "dp_tp", "zero"):
    for create in ("direct", "meta"):
        args = gpt.parser().parse_args(["--parallel", parallel, "--create", create,
                                        "--vocab_multiple", "8", *sys.argv[1:]])
        model, layout = gpt.build(args, 96, world)
        layout.place(model)
        del model, layout
        gc.collect()
