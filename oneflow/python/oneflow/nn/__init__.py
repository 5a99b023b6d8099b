"""oneflow.nn: layers, losses, containers, Parameter, functional and init.

    import oneflow.nn as nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
"""

from oneflow.nn.parameter import Parameter
from oneflow.nn import functional, init
from oneflow.nn.modules.module import Module
from oneflow.nn.modules.linear import Identity, Linear
from oneflow.nn.modules.conv import Conv2d
from oneflow.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm
from oneflow.nn.modules.activation import GELU, LogSoftmax, ReLU, ReLU6, Sigmoid, Softmax, Tanh
from oneflow.nn.modules.activation import (CELU, ELU, GLU, SELU, Hardshrink, Hardsigmoid,  # noqa: F401
                                           Hardswish, Hardtanh, LeakyReLU, LogSigmoid, Mish, SiLU,
                                           PReLU, Softplus, Softshrink, Softsign, Tanhshrink,
                                           Threshold)
from oneflow.nn.modules.normalization import (Embedding, GroupNorm, InstanceNorm1d,  # noqa: F401
                                              InstanceNorm2d, InstanceNorm3d, LayerNorm, RMSNorm)
from oneflow.nn.modules.transformer import (MultiheadAttention, TransformerEncoder,  # noqa: F401
                                            TransformerEncoderLayer)
from oneflow.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,  # noqa: F401
                                        AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d,
                                        MaxPool3d, MaxUnpool1d, MaxUnpool2d,
                                        MaxUnpool3d)
from oneflow.nn.modules.flatten import Dropout, Flatten
from oneflow.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from oneflow.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss,  # noqa: F401
                                     MSELoss, NLLLoss, SmoothL1Loss, L1Loss, CosineSimilarity)

__all__ = [
    "Parameter",
    "functional",
    "init",
    "Module",
    "Identity",
    "Linear",
    "Conv2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "SyncBatchNorm",
    "GELU",
    "LogSoftmax",
    "ReLU",
    "ReLU6",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "MaxPool2d",
    "Dropout",
    "Flatten",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Sequential",
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "KLDivLoss",
    "SmoothL1Loss",
    "MSELoss",
    "NLLLoss",
    "L1Loss", "CosineSimilarity", "CELU", "ELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid",
    "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid", "Mish", "SiLU", "Softplus", "Softshrink",
    "Softsign", "Tanhshrink", "Threshold", "Embedding", "GroupNorm", "LayerNorm", "RMSNorm",
    "MultiheadAttention", "TransformerEncoder", "TransformerEncoderLayer",
]

# ---- conv1d / transposed convolutions, padding, upsampling, channel dropout, recurrent layers
from oneflow.nn.modules.conv_extra import Conv1d, Conv3d, ConvTranspose1d, ConvTranspose2d  # noqa: E402
from oneflow.nn.modules.padding import (ConstantPad1d, ConstantPad2d, ConstantPad3d,  # noqa: E402
                                        ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                                        ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                                        ZeroPad2d)
from oneflow.nn.modules.upsampling import (Dropout1d, Dropout2d, Upsample,  # noqa: E402
                                           UpsamplingBilinear2d, UpsamplingNearest2d)
from oneflow.nn.modules.rnn import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase,  # noqa: E402
                                    RNNCell, RNNCellBase)

__all__ += [
    "Conv1d", "ConvTranspose1d", "ConvTranspose2d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
    "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ZeroPad2d",
    "Dropout1d", "Dropout2d", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d",
    "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase",
    "Conv3d", "BatchNorm3d", "PReLU", "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "InstanceNorm1d",
    "InstanceNorm2d", "InstanceNorm3d",
]
# ---- end conv/padding/upsampling/rnn block

from oneflow.nn.modules.dataset import CoinFlip, OFRecordReader  # noqa: E402,F401
from oneflow.nn.modules.sampling import DistributedPariticalFCSample  # noqa: E402,F401
from oneflow.nn.modules.fold import Fold, Unfold  # noqa: E402,F401
from oneflow.nn import parallel  # noqa: E402,F401
from oneflow.nn import utils  # noqa: E402,F401
from oneflow.nn.graph import Graph  # noqa: E402,F401  (compile mode: traced once, replayed)
from oneflow.nn import optimizer  # noqa: E402,F401  (OneFlow's path of oneflow.optim's classes)
