"""OneFlow's module path for the optimizers and schedulers (oneflow.nn.optimizer.X): the classes
of oneflow.optim, which is where they live.

    from oneflow.nn.optimizer import lr_scheduler, SGD
"""

from oneflow.optim import lr_scheduler  # noqa: F401
from oneflow.optim.adadelta import Adadelta  # noqa: F401
from oneflow.optim.adagrad import Adagrad  # noqa: F401
from oneflow.optim.adam import Adam, AdamW  # noqa: F401
from oneflow.optim.lamb import LAMB  # noqa: F401
from oneflow.optim.optimizer import Optimizer  # noqa: F401
from oneflow.optim.rmsprop import RMSprop  # noqa: F401
from oneflow.optim.sgd import SGD  # noqa: F401
from oneflow.optim import swa_utils  # noqa: F401,E402
