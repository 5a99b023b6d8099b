"""oneflow.nn.utils: gradient clipping, parameters as one vector, and rnn.pad_sequence.

    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
"""

from oneflow.nn.utils import rnn
from oneflow.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
from oneflow.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters", "rnn"]
