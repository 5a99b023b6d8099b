"""Recurrent layers with PyTorch's parameter names, shapes, gate order and initialisation, so a
state_dict copied from torch gives the same outputs: RNN, LSTM, GRU and their cells.

    lstm = nn.LSTM(input_size=8, hidden_size=16, num_layers=2, batch_first=True)
    output, (h_n, c_n) = lstm(x)               # x (N, L, 8) -> output (N, L, 16)

Each step is matmul / sigmoid / tanh on the tensors, so autograd follows the unrolled loop.
Gate order: LSTM (i, f, g, o), GRU (r, z, n).
"""

import math
import numbers
import warnings

import oneflow as flow
from oneflow._api_util import INT64_MAX, _check_tensor_size, _int_arg
from oneflow.nn import functional as F
from oneflow.nn import init
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(x_gates, h, c, w_hh, b_hh):
    gates = x_gates + F.linear(h, w_hh, b_hh)
    hs = h.size(-1)
    i = flow.sigmoid(gates[..., :hs])
    f = flow.sigmoid(gates[..., hs : 2 * hs])
    g = flow.tanh(gates[..., 2 * hs : 3 * hs])
    o = flow.sigmoid(gates[..., 3 * hs :])
    c = f * c + i * g
    return o * flow.tanh(c), c


def _gru_step(x_gates, h, w_hh, b_hh):
    h_gates = F.linear(h, w_hh, b_hh)
    hs = h.size(-1)
    r = flow.sigmoid(x_gates[..., :hs] + h_gates[..., :hs])
    z = flow.sigmoid(x_gates[..., hs : 2 * hs] + h_gates[..., hs : 2 * hs])
    n = flow.tanh(x_gates[..., 2 * hs :] + r * h_gates[..., 2 * hs :])
    return (1.0 - z) * n + z * h


def _rnn_step(x_gates, h, w_hh, b_hh, relu):
    pre = x_gates + F.linear(h, w_hh, b_hh)
    return flow.relu(pre) if relu else flow.tanh(pre)


def _check_hidden(name, what, t, want):
    if not isinstance(t, flow.Tensor):
        raise TypeError(f"{name}: expected {what} to be a tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{name}: expected {what} of shape {tuple(want)}, got {tuple(t.shape)}")


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) \
                or not 0 <= dropout <= 1:
            raise ValueError(
                f"{name}: dropout should be a number in range [0, 1] representing the "
                f"probability of an element being zeroed, got {dropout!r}"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}"
            )
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size),
                        ("num_layers", num_layers)):
            _int_arg(v, name, what, 1)
        # Every parameter together, checked before the loop that makes them: a num_layers of
        # 2**62 is refused here, not after hours of building layers.
        num_directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        per_layer = gate_size * (max(input_size, hidden_size * num_directions) + hidden_size + 2)
        total = num_layers * num_directions * per_layer
        if total > INT64_MAX:
            raise ValueError(f"{name}: num_layers={num_layers}, hidden_size={hidden_size} and "
                             f"input_size={input_size} make {total} parameters, more than int64 "
                             f"can count")
        _check_tensor_size(name, (total,), dtype)
        if proj_size != 0:
            raise NotImplementedError(f"{name}: proj_size is not supported, got {proj_size}")
        self._name = name
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                for pname, shape in shapes:
                    full = f"{pname}_l{layer}{suffix}"
                    setattr(self, full, Parameter(flow.empty(*shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(full)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """PyTorch packs the weights for cuDNN here; nothing to do."""

    def _layer_params(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        get = lambda p: getattr(self, f"{p}_l{layer}{suffix}")  # noqa: E731
        if self.bias:
            return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")
        return get("weight_ih"), get("weight_hh"), None, None

    def forward(self, input, hx=None):
        name = self._name
        if not isinstance(input, flow.Tensor):
            raise TypeError(f"{name}: expected the input to be a tensor (PackedSequence is not "
                            f"supported), got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2-D or 3-D but received "
                             f"{input.dim()}-D tensor")
        batched = input.dim() == 3
        if input.size(-1) != self.input_size:
            raise ValueError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.size(-1)}")
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        seq_len, batch = x.size(0), x.size(1)
        num_directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * num_directions, batch, self.hidden_size)
        shown = state_shape if batched else (state_shape[0], state_shape[2])
        is_lstm = self.mode == "LSTM"
        if hx is None:
            h0 = flow.zeros(*state_shape, dtype=x.dtype, device=x.device)
            c0 = h0 if is_lstm else None
        elif is_lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: expected hx as a tuple (h_0, c_0), got {type(hx).__name__}")
            _check_hidden(name, "h_0", hx[0], shown)
            _check_hidden(name, "c_0", hx[1], shown)
            h0, c0 = (hx[0], hx[1]) if batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        else:
            _check_hidden(name, "h_0", hx, shown)
            h0, c0 = (hx if batched else hx.unsqueeze(1)), None

        h_n, c_n = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(num_directions):
                w_ih, w_hh, b_ih, b_hh = self._layer_params(layer, direction)
                k = layer * num_directions + direction
                h = h0[k]
                c = c0[k] if is_lstm else None
                x_gates = F.linear(layer_input, w_ih, b_ih)  # every step at once
                steps = range(seq_len) if direction == 0 else range(seq_len - 1, -1, -1)
                out = [None] * seq_len
                for t in steps:
                    if is_lstm:
                        h, c = _lstm_step(x_gates[t], h, c, w_hh, b_hh)
                    elif self.mode == "GRU":
                        h = _gru_step(x_gates[t], h, w_hh, b_hh)
                    else:
                        h = _rnn_step(x_gates[t], h, w_hh, b_hh, self.mode == "RNN_RELU")
                    out[t] = h
                outputs.append(flow.stack(out, 0))
                h_n.append(h)
                if is_lstm:
                    c_n.append(c)
            layer_input = outputs[0] if num_directions == 1 else flow.cat(outputs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)

        output = layer_input
        h_n = flow.stack(h_n, 0)
        c_n = flow.stack(c_n, 0) if is_lstm else None
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if is_lstm else None
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: Unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        input_size = _int_arg(input_size, name, "input_size")
        hidden_size = _int_arg(hidden_size, name, "hidden_size")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = self._gates * hidden_size
        _check_tensor_size(name, (g * (input_size + hidden_size + 2),), dtype)
        self.weight_ih = Parameter(flow.empty(g, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(flow.empty(g, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(flow.empty(g, dtype=dtype, device=device))
            self.bias_hh = Parameter(flow.empty(g, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, lstm):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1-D or 2-D but received "
                             f"{input.dim()}-D tensor")
        if input.size(-1) != self.input_size:
            raise ValueError(f"{name}: input has inconsistent input_size: got {input.size(-1)} "
                             f"expected {self.input_size}")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        shape = (x.size(0), self.hidden_size)
        shown = shape if batched else (self.hidden_size,)
        if hx is None:
            h = flow.zeros(*shape, dtype=x.dtype, device=x.device)
            return x, batched, (h, h) if lstm else h
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: expected hx as a tuple (h_0, c_0), got {type(hx).__name__}")
            _check_hidden(name, "h_0", hx[0], shown)
            _check_hidden(name, "c_0", hx[1], shown)
            return x, batched, tuple(t if batched else t.unsqueeze(0) for t in hx)
        _check_hidden(name, "hx", hx, shown)
        return x, batched, hx if batched else hx.unsqueeze(0)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        return s


class LSTMCell(RNNCellBase):
    _gates = 4

    def forward(self, input, hx=None):
        x, batched, (h, c) = self._prepare(input, hx, True)
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    _gates = 3

    def forward(self, input, hx=None):
        x, batched, h = self._prepare(input, hx, False)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class RNNCell(RNNCellBase):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: Unknown nonlinearity: {nonlinearity} (expected 'tanh' or 'relu')")
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, batched, h = self._prepare(input, hx, False)
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)
