"""Two epochs of a DataLoader (DistributedSampler with shuffle, 2 workers) on every rank, each
batch printed as `batch E I: values drew [random numbers drawn after it]`. With a folder: the
state is saved (flow.utils.training_state) after batch 2 of epoch 1, rank 1 then dies by
SIGKILL in the first start, and a start finding the checkpoint goes on from it.

    usage: loader_resume.py [FOLDER]
"""

import os
import signal
import sys

import oneflow as flow
from oneflow.utils import training_state
from oneflow.utils.data import DataLoader, DistributedSampler, TensorDataset

folder = sys.argv[1] if len(sys.argv) > 1 else None
flow.manual_seed(5 + flow.env.get_rank())  # each rank its own random numbers
dataset = TensorDataset(flow.arange(46).reshape(46, 1))
sampler = DistributedSampler(dataset, shuffle=True, seed=7)
loader = DataLoader(dataset, batch_size=3, sampler=sampler, num_workers=2)
start_epoch = 0
if folder:
    resumed = training_state.load(folder, dataloader=loader)
    if resumed is not None:
        start_epoch = resumed["extra"]["epoch"]
        print(f"resumed at epoch {start_epoch} batch {resumed['step']}", flush=True)
for epoch in range(start_epoch, 2):
    sampler.set_epoch(epoch)
    batches = iter(loader)
    for i, (x,) in enumerate(batches, start=loader.state_dict()["yielded"]):
        drawn = flow.randn(2).numpy().tolist()  # a model drawing random numbers
        print(f"batch {epoch} {i}: {x.numpy().ravel().tolist()} drew {drawn}", flush=True)
        if folder and epoch == 1 and i == 2 and os.environ["ONEFLOW_RESTART_COUNT"] == "0":
            training_state.save(folder, 3, dataloader=loader, extra={"epoch": epoch})
            if flow.env.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            flow.comm.barrier()  # rank 0 waits here for its end
