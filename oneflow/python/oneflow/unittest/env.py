"""The shape of the running test job: nodes and devices per node (OneFlow's names)."""

import os

import oneflow


def node_size():
    n = os.getenv("ONEFLOW_TEST_NODE_NUM")
    return int(n) if n else oneflow.env.get_node_size()


def device_num():
    d = os.getenv("ONEFLOW_TEST_DEVICE_NUM")
    return int(d) if d else oneflow.env.get_local_world_size()


def world_size():
    return oneflow.env.get_world_size()


def has_world_size():
    return True


def has_node_list():
    return bool(os.getenv("ONEFLOW_TEST_NODE_LIST"))


def node_list():
    return [h for h in os.getenv("ONEFLOW_TEST_NODE_LIST", "").split(",") if h]


def eager_execution_enabled():
    return True


def typing_check_enabled():
    return os.getenv("ONEFLOW_TEST_ENABLE_TYPING_CHECK") == "1"
