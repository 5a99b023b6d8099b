"""DistributedDataParallel: one model replica per rank, gradients averaged across ranks.

At wrap time every rank checks that its parameters have the shapes of every other rank's and
takes rank 0's parameters and buffers. During backward, gradients are grouped into buckets of
about `bucket_cap_mb` MiB in reverse parameter order; each bucket's all-reduce (an average:
the sum over ranks divided by their number, so a per-rank mean loss gives the gradient of the
global mean) starts as soon as its last gradient is accumulated. Backward returns once every
bucket is reduced, so `optimizer.step()` sees averaged gradients. Ranks on one machine keep
their buckets in shared memory and reduce them there in place.

Where the machine has a core to spare for each rank's communication thread (cores >= local
ranks x (OMP_NUM_THREADS + 1)), bucket all-reduces run on that thread, overlapping the rest of
backward; on a busier machine they run inline in backward, which is faster there (the thread
would only take cores from compute). ONEFLOW_DDP_OVERLAP=1 or 0 forces either.

    model = DistributedDataParallel(model)
    with model.no_sync():           # accumulate locally
        model(x1).sum().backward()
    model(x2).sum().backward()      # reduces the accumulated gradients
"""

import os
from contextlib import contextmanager

import oneflow as flow
from oneflow import _C
from oneflow.nn.modules.module import Module


class DistributedDataParallel(Module):
    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        dim=0,
        broadcast_buffers=True,
        process_group=None,
        bucket_cap_mb=25,
        find_unused_parameters=False,
        check_reduction=False,
        gradient_as_bucket_view=False,
        static_graph=False,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got {type(module).__name__}")
        if isinstance(getattr(process_group, "ranks", None), list):  # dist.new_group's result
            process_group = process_group.ranks
        if process_group is not None and not isinstance(process_group, (list, tuple)):
            raise TypeError("DistributedDataParallel: process_group must be a list of ranks, "
                            f"a group from new_group or None, got {type(process_group).__name__}")
        # device_ids / output_device (PyTorch's, for a module on one GPU) change nothing here:
        # the module's parameters are already on their device and outputs stay where computed.
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device = output_device
        if bucket_cap_mb is None or bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.process_group = list(process_group) if process_group is not None else None
        ranks = self.process_group
        self._root = ranks[0] if ranks else 0

        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        for n, p in named:
            if p.is_global:
                raise ValueError(f"DistributedDataParallel: parameter '{n}' is a global tensor; "
                                 "DDP wraps a local module (a global module with broadcast "
                                 "parameters gets all-reduced gradients without DDP)")
        names = [n for n, _ in named]
        params = [p for _, p in named]
        self._buffers_to_sync = [b for _, b in module.named_buffers() if b is not None]
        _C.ddp_verify_param_shapes(params, names, ranks)
        with flow.no_grad():
            _C.ddp_broadcast_coalesced(params + self._buffers_to_sync, self._root, ranks)
        cap = int(bucket_cap_mb * 1024 * 1024)
        overlap = os.environ.get("ONEFLOW_DDP_OVERLAP", "auto")
        if overlap not in ("auto", "0", "1"):
            raise ValueError(f"DistributedDataParallel: ONEFLOW_DDP_OVERLAP must be 0, 1 or auto, got '{overlap}'")
        self.reducer = _C.Reducer(params, names, ranks, cap, min(cap, 1024 * 1024),
                                  bool(find_unused_parameters),
                                  None if overlap == "auto" else overlap == "1")

    def __getattr__(self, name):
        # The wrapped module still answers for its own attributes (m.lr, m.w ...).
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        module = self.__dict__.get("_modules", {}).get("module")
        if module is None:
            raise AttributeError(f"'DistributedDataParallel' object has no attribute '{name}'")
        return getattr(module, name)

    def forward(self, *inputs, **kwargs):
        if self.module.training and self.broadcast_buffers and self._buffers_to_sync:
            with flow.no_grad():
                _C.ddp_broadcast_coalesced(self._buffers_to_sync, self._root, self.process_group)
        if flow.is_grad_enabled():
            self.reducer.prepare_for_backward()
        return self.module(*inputs, **kwargs)

    @contextmanager
    def no_sync(self):
        """Gradients of backward passes inside accumulate locally; the first backward after
        the block reduces the accumulated sum."""
        old = self.reducer.sync
        self.reducer.sync = False
        try:
            yield
        finally:
            self.reducer.sync = old

    def bucket_indices(self):
        """Parameter indices (in module.parameters() order) of each bucket, in launch order."""
        return self.reducer.bucket_indices()

    def comm_stats(self):
        """reductions, comm_seconds (all-reduce time), exposed_seconds (time backward waited
        for communication, the part not hidden behind it), copied_bytes (gradient bytes copied
        into buckets: a linear layer's weight gradient is computed in its bucket, and a rank's
        own part of a shared-memory bucket is read from the gradients in place) and overlap
        (whether all-reduces run on the communication thread)."""
        stats = self.reducer.stats()
        stats["overlap"] = self.reducer.overlap
        return stats
