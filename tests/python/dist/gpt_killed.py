"""examples/gpt.py whose rank KILL_RANK, as it begins step KILL_STEP in the first start of the
job only (ONEFLOW_RESTART_COUNT 0), SIGKILLs itself (WHAT = rank) or its launcher (WHAT =
launcher, and with it every rank of that node): the loss of a rank or of a host at a chosen step.

    usage: gpt_killed.py WHAT KILL_RANK KILL_STEP [gpt.py arguments ...]
"""

import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples"))
import gpt  # noqa: E402
import oneflow as flow  # noqa: E402

what, kill_rank, kill_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps_taken = [0]
step = gpt.Trainer.step


def step_or_die(self, xb, yb):
    if flow.env.get_rank() == kill_rank and os.environ.get("ONEFLOW_RESTART_COUNT") == "0" \
            and steps_taken[0] == kill_step:
        print(f"rank {kill_rank}: SIGKILL to its {what} at step {kill_step}", flush=True)
        os.kill(os.getpid() if what == "rank" else os.getppid(), signal.SIGKILL)
    steps_taken[0] += 1
    return step(self, xb, yb)


gpt.Trainer.step = step_or_die
gpt.main(sys.argv[4:])
