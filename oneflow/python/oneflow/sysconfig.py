"""How this build of oneflow was made (OneFlow's oneflow.sysconfig):

    oneflow.sysconfig.with_cuda()          # False in a build without CUDA
    oneflow.sysconfig.get_cuda_version()   # 11080 for CUDA 11.8; 0 without CUDA
"""

import oneflow._oneflow_internal as _C

__all__ = ["with_cuda", "get_cuda_version"]


def with_cuda():
    return _C.flags.with_cuda()


def get_cuda_version():
    return _C.flags.cuda_version()
