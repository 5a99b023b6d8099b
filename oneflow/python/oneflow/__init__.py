"""oneflow: global-tensor deep learning on a C++ core.

    import oneflow as flow
    x = flow.randn(2, 3, requires_grad=True)
    (x * x).sum().backward()
"""

import oneflow._oneflow_internal as _C

Tensor = _C.Tensor
dtype = _C.dtype
device = _C.device

bool = _C.bool
uint8 = _C.uint8
int8 = _C.int8
int32 = _C.int32
int = _C.int32
int64 = _C.int64
long = _C.int64
float16 = _C.float16
half = _C.float16
bfloat16 = _C.bfloat16
float32 = _C.float32
float = _C.float32
float64 = _C.float64
double = _C.float64
complex64 = _C.complex64
cfloat = _C.complex64
complex128 = _C.complex128
cdouble = _C.complex128


def _dtype_from_name(name):
    return getattr(_C, name)


from oneflow._creation import *  # noqa: E402,F401,F403  (tensor, zeros, arange, ...)
from oneflow._random import *  # noqa: E402,F401,F403  (Generator, manual_seed, randn, ...)
from oneflow._grad_mode import *  # noqa: E402,F401,F403  (no_grad, inference_mode, ...)
from oneflow._ops import *  # noqa: E402,F401,F403  (add, sum, reshape, ...)
from oneflow._math_api import *  # noqa: E402,F401,F403  (math, activations, reductions)
from oneflow._api_util import Size  # noqa: E402,F401
from oneflow._tensor_types import *  # noqa: E402,F401,F403  (FloatTensor, LongTensor, ... legacy constructors)
from oneflow._misc import (allclose, finfo, get_default_dtype, iinfo, isclose, set_default_dtype,  # noqa: E402,F401
                           set_printoptions)
from oneflow._index_api import *  # noqa: E402,F401,F403  (everyday index/sort/matmul API)
from oneflow._breadth_ops import *  # noqa: E402,F401,F403  (fmod, tile, movedim, ... issue 38)
from oneflow._complex import *  # noqa: E402,F401,F403  (real, imag, conj, view_as_real, ...)
from oneflow import _global, _ops, _tensor_methods  # noqa: E402
from oneflow._global import placement, sbp  # noqa: E402,F401

_tensor_methods.install()  # every Tensor method, local and global, in one place
_C.reshape_like = _ops.reshape_like  # OneFlow's functional API (flow._C) has it
from oneflow import env, cuda, comm, backends, distributed  # noqa: E402,F401
from oneflow import autograd, nn, optim, utils  # noqa: E402,F401
from oneflow import one_embedding  # noqa: E402,F401  (OneFlow's Ftrl)
from oneflow.nn.modules.sampling import distributed_partial_fc_sample  # noqa: E402,F401
from oneflow import amp, cpu  # noqa: E402,F401
from oneflow.amp import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: E402,F401


def is_autocast_cpu_enabled():
    return amp.is_autocast_enabled("cpu")


def get_autocast_gpu_dtype():
    return amp.get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    return amp.get_autocast_dtype("cpu")


from oneflow.serialization import save, load  # noqa: E402,F401
_global._install_functions()  # flow.zeros(..., placement=, sbp=) and friends
from oneflow import linalg  # noqa: E402,F401
from oneflow import special  # noqa: E402,F401

from oneflow import framework  # noqa: E402,F401  (OneFlow's module paths: framework.tensor, ...)
from oneflow import fx  # noqa: E402,F401  (symbolic tracing)

__version__ = "0.1.0"
