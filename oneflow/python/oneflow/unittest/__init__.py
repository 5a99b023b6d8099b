"""oneflow.unittest: OneFlow's helpers for tests that run on one or more ranks.

    import oneflow.unittest

    @flow.unittest.skip_unless_1n2d()          # runs only in a job of 1 node x 2 devices
    class TestX(flow.unittest.TestCase):
        def test_y(self): ...

Launch the file with as many ranks as its decorators ask for:
`python3 -m oneflow.distributed.launch --nproc_per_node 2 test_x.py`. The node and device counts
come from ONEFLOW_TEST_NODE_NUM / ONEFLOW_TEST_DEVICE_NUM when set (as in OneFlow's CI), otherwise
from the running job (nodes, ranks per node).
"""

import os
import unittest
from typing import Callable

import oneflow

from . import env  # noqa: F401

TestCase = unittest.TestCase


def node_size():
    return env.node_size()


def device_num():
    return env.device_num()


def world_size():
    return oneflow.env.get_world_size()


def num_nodes_required(num_nodes: int) -> Callable[[Callable], Callable]:
    def decorator(f):
        f.__oneflow_test_num_nodes_required__ = num_nodes
        return f
    return decorator


def skip_unless(n, d):
    if env.node_size() == n and env.device_num() == d:
        return lambda func: func
    return unittest.skip(f"only runs when node_size is {n} and device_num is {d}")


def skip_unless_1n1d():
    return skip_unless(1, 1)


def skip_unless_1n2d():
    return skip_unless(1, 2)


def skip_unless_1n4d():
    return skip_unless(1, 4)


def skip_unless_2n1d():
    return skip_unless(2, 1)


def skip_unless_2n2d():
    return skip_unless(2, 2)


def skip_unless_2n4d():
    return skip_unless(2, 4)


def register_test_cases(scope, directory, filter_by_num_nodes, base_class=TestCase,
                        test_case_mixin=object):
    raise NotImplementedError("oneflow.unittest.register_test_cases: not supported; run the test "
                              "files with unittest or pytest")
