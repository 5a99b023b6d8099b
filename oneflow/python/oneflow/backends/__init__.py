"""oneflow.backends: switches of the CUDA math libraries, as torch.backends.

    flow.backends.cuda.matmul.allow_tf32 = True   # TF32 for float32 matmul (off by default)
    flow.backends.cudnn.allow_tf32 = False         # TF32 for float32 convolutions (on by default)

The defaults are PyTorch's.
"""

import oneflow._oneflow_internal as _C


class _Matmul:
    @property
    def allow_tf32(self):
        return _C.cuda_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C.cuda_set_allow_tf32(bool(value))


class _CudaBackend:
    matmul = _Matmul()

    @staticmethod
    def is_built():
        return _C.cuda_built()


class _CudnnBackend:
    enabled = True

    @property
    def allow_tf32(self):
        return _C.cudnn_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C.cudnn_set_allow_tf32(bool(value))

    @staticmethod
    def is_available():
        return _C.cuda_built() and _C.cuda_device_count() > 0


cuda = _CudaBackend()
cudnn = _CudnnBackend()
