"""Complex tensors (oneflow.complex64 / cfloat, complex128 / cdouble), as OneFlow has them:
real() and imag() are methods (views of the pairs), conj() makes a new tensor.

    z = flow.tensor([1 + 2j, 3 - 1j])        # complex64
    z.real(), z.imag(), z.conj(), z.abs(), flow.angle(z)
    flow.view_as_real(z)                     # float32 (2, 2), shares z's memory
    flow.complex(flow.ones(2), flow.zeros(2))

Arithmetic on complex tensors (+ - * / **, exp, log, sqrt, abs, sum, mean, matmul, ==, !=) is
the ordinary ops, which take complex inputs through their complex rules (core/ops/complex.h);
other ops refuse them in one line naming the op.
"""

import oneflow._oneflow_internal as _C
from oneflow._dtype_util import is_complex as _is_complex_dtype

__all__ = ["real", "imag", "conj", "conj_physical", "angle", "view_as_real", "view_as_complex",
           "complex", "is_complex"]



def real(input):
    """The real part: a view of a complex input; a real input itself."""
    return _C.real(input)


def imag(input):
    """The imaginary part: a view; a real input is an error."""
    return _C.imag(input)


def conj(input):
    """The complex conjugate, a new tensor (no lazy conjugate bit); a real input itself."""
    return _C.conj(input)


conj_physical = conj


def angle(input):
    return _C.angle(input)


def view_as_real(input):
    return _C.view_as_real(input)


def view_as_complex(input):
    return _C.view_as_complex(input)


def complex(real, imag):
    return _C.complex(real, imag)


def is_complex(input):
    return _is_complex_dtype(input.dtype)


def _resolve_conj(self):
    # No lazy conjugate bit: every conj() is already resolved.
    return self


def _tensor_methods():
    return {"real": real, "imag": imag, "conj": conj, "conj_physical": conj_physical,
            "angle": angle, "is_complex": is_complex, "resolve_conj": _resolve_conj,
            "cfloat": lambda self: self.to(_C.complex64),
            "cdouble": lambda self: self.to(_C.complex128)}
