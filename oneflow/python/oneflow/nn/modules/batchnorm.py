"""BatchNorm1d and BatchNorm2d with PyTorch's running statistics.

    bn = nn.BatchNorm2d(16)     # training: batch statistics, updates running_mean/var
    bn.eval()                   # eval: normalises with running_mean/var
"""

import oneflow as flow
from oneflow.nn import functional as F
from oneflow.nn import init
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter


class _NormBase(Module):
    """What batch and instance norms hold (PyTorch's _NormBase): weight and bias when affine,
    running_mean / running_var / num_batches_tracked when tracking running statistics."""

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, device=None,
                 dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(flow.empty(num_features, dtype=dtype, device=device))
            self.bias = Parameter(flow.empty(num_features, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", flow.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", flow.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", flow.tensor(0, dtype=flow.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with flow.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)


class _BatchNorm(_NormBase):
    _expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _check_input_dim(self, input):
        if input.dim() not in self._expected_dims:
            wanted = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"{self._get_name()}: expected {wanted} input (got {input.dim()}D input)")

    def _momentum_factor(self):
        """Counts a training batch; the running statistics' update factor for it."""
        # momentum=None means a cumulative moving average: factor 1/n for the n-th batch.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with flow.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        return factor

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and input.is_global and any(s != flow.sbp.broadcast for s in input.sbp):
            # A batch split over ranks: statistics over the whole batch through global ops
            # (boxing all-reduces their partial sums), so the layer stays data-parallel.
            return self._normalize_with_batch_stats(input, lambda t: t, input.numel() // input.size(1))
        factor = self._momentum_factor()
        # Without running statistics, eval mode still normalises with the batch's.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_batch_stats,
            factor,
            self.eps,
        )

    def _normalize_with_batch_stats(self, input, sum_over_ranks, total):
        """Training batch norm from per-channel sums that sum_over_ranks completes over the
        global batch of `total` values per channel: two passes (mean, then squared
        deviations) for accuracy; normalising with given statistics is batch_norm's eval path,
        differentiable in them."""
        if total <= 1:
            raise ValueError(f"{self._get_name()}: expected more than 1 value per channel over "
                             f"the whole batch when training, got input of shape {tuple(input.shape)}")
        factor = self._momentum_factor()
        c = input.size(1)
        dims = [0] + list(range(2, input.dim()))
        bshape = [1, c] + [1] * (input.dim() - 2)
        mean = sum_over_ranks(input.sum(dims)) / total
        dev = input - mean.reshape(bshape)
        var = sum_over_ranks((dev * dev).sum(dims)) / total
        if self.track_running_stats and self.running_mean is not None:
            with flow.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                unbiased = var.detach() * (total / (total - 1))
                self.running_var.mul_(1 - factor).add_(unbiased * factor)
        return F.batch_norm(input, mean, var, self.weight, self.bias, False, 0.0, self.eps)

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Over (N, C, D, H, W) inputs."""

    _expected_dims = (5,)


class _AllReduceSum(flow.autograd.Function):
    """Sum over the ranks of `group`; its gradient is the sum of the ranks' gradients."""

    @staticmethod
    def forward(ctx, t, group):
        ctx.group = group
        out = t.clone()
        flow.comm.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        flow.comm.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose training statistics cover the global batch: the per-channel sums of
    every rank in `process_group` (a list of ranks; None: all) are all-reduced, in forward and
    in backward. Works on CPU (Gloo or shared memory) as on CUDA. In eval mode, or in a job
    of one process, it is BatchNorm.

        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = DistributedDataParallel(model)
    """

    _expected_dims = (2, 3, 4)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _group_size(self):
        if self.process_group is not None:
            return len(self.process_group)
        return flow.env.get_world_size()

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or self._group_size() == 1 or input.is_global:
            return super().forward(input)
        count = flow.tensor([input.numel() // input.size(1)], dtype=flow.int64)
        flow.comm.all_reduce(count, group=self.process_group)
        group = self.process_group
        return self._normalize_with_batch_stats(
            input, lambda t: _AllReduceSum.apply(t, group), int(count.item()))

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Returns module with every BatchNorm*d replaced by a SyncBatchNorm holding the same
        parameters and running statistics (module itself when it is a BatchNorm)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group)
            if module.affine:
                with flow.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
