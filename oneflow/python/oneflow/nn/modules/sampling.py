"""Class sampling for a fully connected layer over very many classes (OneFlow's partial FC, as in
face recognition): every positive class of the batch plus random negatives, per shard of a
weight split over its rows."""

import oneflow as flow
from oneflow.nn.modules.module import Module


def _shards(weight):
    """(number of row shards, this rank's shard index, its first row) of weight: a global
    weight split over rows on a 1-D placement has one shard per rank, anything else one."""
    if not weight.is_global or weight.sbp[0] != flow.sbp.split(0) or len(weight.sbp) != 1:
        return 1, 0, 0
    ranks = weight.placement.ranks.tolist()
    me = flow.env.get_rank()
    if me not in ranks:
        return len(ranks), -1, 0
    n, i = len(ranks), ranks.index(me)
    rows = weight.shape[0]
    return n, i, i * (rows // n)


def distributed_partial_fc_sample(weight, label, num_sample):
    """(mapped_label, sampled_label, sampled_weight): sampled_label holds num_sample class ids —
    each shard of a row-split weight contributes num_sample / shards of its own, all the batch's
    classes it holds first, then random others —, sampled_weight = weight[sampled_label], and
    sampled_label[mapped_label] == label. Shapes (N,), (num_sample,), (num_sample, D); global
    results are split like the weight (mapped_label: broadcast)."""
    if weight.ndim != 2:
        raise ValueError(f"distributed_partial_fc_sample: weight must be 2-D (classes, features), "
                         f"got shape {tuple(weight.shape)}")
    if label.ndim != 1:
        raise ValueError(f"distributed_partial_fc_sample: label must be 1-D, got shape {tuple(label.shape)}")
    classes = weight.shape[0]
    n, i, lo = _shards(weight)
    if num_sample % n or classes % n or num_sample > classes:
        raise ValueError(f"distributed_partial_fc_sample: num_sample {num_sample} and the {classes} "
                         f"classes must divide over the weight's {n} shards, num_sample <= classes")
    k, per = num_sample // n, classes // n
    import numpy as np  # numpy is optional: imported where it is used

    labels = label.numpy()  # a global label's whole value, on every rank
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"distributed_partial_fc_sample: labels must be in [0, {classes}), got "
                         f"[{labels.min()}, {labels.max()}]")
    # Checked for every shard on every rank (all hold all labels), so all ranks raise together.
    crowded = int(np.bincount(np.unique(labels) // per).max()) if labels.size else 0
    if crowded > k:
        raise ValueError(f"distributed_partial_fc_sample: a shard holds {crowded} classes of the "
                         f"batch but samples only {k} (num_sample {num_sample} over {n} shards)")
    local_w = weight.to_local() if weight.is_global else weight
    mapped = np.zeros(labels.shape, np.int64)
    picked = np.zeros(0, np.int64)
    if i >= 0:
        mine = (labels >= lo) & (labels < lo + per)
        positives = np.unique(labels[mine]) - lo
        if weight.is_global and n == 1:  # one draw for the whole placement: B results agree
            order = flow.randperm(per, placement=weight.placement,
                                  sbp=[flow.sbp.broadcast] * len(weight.sbp)).to_local().numpy()
        else:
            order = flow.randperm(per).numpy()
        negatives = order[~np.isin(order, positives)][:k - positives.size]
        picked = np.concatenate([positives, np.sort(negatives)]).astype(np.int64)
        where = {c: j for j, c in enumerate(picked)}
        mapped[mine] = [i * k + where[c - lo] for c in labels[mine]]
    rows = flow.tensor(picked, dtype=flow.int64)
    sampled_w = local_w[rows] if i >= 0 else local_w[:0]
    sampled = rows + lo
    mapped_t = flow.tensor(mapped, dtype=label.dtype)
    if not weight.is_global:
        return mapped_t, sampled.to(label.dtype), sampled_w
    placement = weight.placement
    nd = len(weight.sbp)
    if n == 1:
        keep = [flow.sbp.broadcast] * nd
        return (mapped_t.to_global(placement=placement, sbp=keep),
                sampled.to(label.dtype).to_global(placement=placement, sbp=keep),
                sampled_w.to_global(placement=placement, sbp=keep))
    split = [flow.sbp.split(0)]
    # Each shard maps only its own classes (zeros elsewhere): their sum is every label's place.
    mapped_g = mapped_t.to_global(placement=placement, sbp=[flow.sbp.partial_sum])
    return (mapped_g.to_global(sbp=[flow.sbp.broadcast]),
            sampled.to(label.dtype).to_global(placement=placement, sbp=split),
            sampled_w.to_global(placement=placement, sbp=split))


class DistributedPariticalFCSample(Module):
    """Module form of distributed_partial_fc_sample (OneFlow's name, spelling included)."""

    def __init__(self, num_sample):
        super().__init__()
        self.num_sample = num_sample

    def forward(self, weight, label):
        return distributed_partial_fc_sample(weight, label, self.num_sample)
