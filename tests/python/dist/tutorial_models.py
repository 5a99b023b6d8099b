"""The models and optimizers the data-parallel checks (global_train.py, ddp_check.py) train
against one-process training: the same seed, so every rank builds the same weights."""

import oneflow as flow
import oneflow.nn as nn


def make_model(name):
    flow.manual_seed(7)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return nn.Sequential(
        nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 32), nn.ReLU(), nn.Linear(32, 10))


def make_opt(name, params):
    if name == "sgd":
        return flow.optim.SGD(params, lr=0.05, momentum=0.9)
    return flow.optim.Adam(params, lr=1e-3)
