"""oneflow.optim: SGD, Adam, AdamW, LAMB, RMSprop, Adagrad, Adadelta (OneFlow's update rules) and
learning-rate schedulers.

    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = optim.lr_scheduler.StepLR(opt, step_size=10)
"""

from oneflow.optim import lr_scheduler
from oneflow.optim.adadelta import Adadelta
from oneflow.optim.adagrad import Adagrad
from oneflow.optim.adam import Adam, AdamW
from oneflow.optim.lamb import LAMB
from oneflow.optim.optimizer import Optimizer
from oneflow.optim.rmsprop import RMSprop
from oneflow.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "LAMB", "RMSprop", "Adagrad", "Adadelta", "lr_scheduler"]
