"""flow.nms (OneFlow's name; torchvision.ops.nms) against torchvision on the same boxes."""

import numpy as np
import pytest
import torch
import torchvision

import oneflow as flow


@pytest.mark.parametrize("n,iou", [(1, 0.5), (50, 0.3), (300, 0.5), (300, 0.9)])
def test_nms_keeps_what_torchvision_keeps(n, iou):
    rng = np.random.default_rng(n)
    boxes = rng.random((n, 4)) * 100
    boxes[:, 2:] += boxes[:, :2] * 0.5 + 1  # x2 > x1, y2 > y1, many overlaps
    scores = rng.permutation(n).astype(np.float32)  # distinct: one order
    want = torchvision.ops.nms(torch.tensor(boxes, dtype=torch.float32),
                               torch.tensor(scores), iou).numpy()
    got = flow.nms(flow.tensor(boxes, dtype=flow.float32), flow.tensor(scores), iou)
    assert got.dtype == flow.int64 and got.numpy().tolist() == want.tolist()


def test_nms_of_no_boxes_is_empty():
    got = flow.nms(flow.zeros(0, 4), flow.zeros(0), 0.5)
    assert got.dtype == flow.int64 and tuple(got.shape) == (0,)


def test_nms_errors_are_one_line():
    with pytest.raises(RuntimeError, match=r"^nms: boxes must be \(N, 4\), got \(3, 5\)$"):
        flow.nms(flow.zeros(3, 5), flow.zeros(3), 0.5)
    with pytest.raises(RuntimeError, match=r"^nms: scores must be \(N,\) for 3 boxes, got \(2,\)$"):
        flow.nms(flow.zeros(3, 4), flow.zeros(2), 0.5)
