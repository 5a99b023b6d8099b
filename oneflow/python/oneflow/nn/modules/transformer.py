"""MultiheadAttention and the Transformer encoder (PyTorch's parameter names, shapes, defaults
and numerics, so a state_dict from torch gives the same outputs).

    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, batch_first=True)
    enc = nn.TransformerEncoder(layer, num_layers=2)
"""

import copy
import math

import oneflow as flow
from oneflow._api_util import _check_tensor_size, _int_arg
from oneflow.nn import functional as F
from oneflow.nn import init
from oneflow.nn.modules.container import ModuleList
from oneflow.nn.modules.linear import Linear
from oneflow.nn.modules.module import Module
from oneflow.nn.modules.normalization import LayerNorm
from oneflow.nn.modules.flatten import Dropout
from oneflow.nn.parameter import Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention.out_proj (kept for its repr)."""


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not "
                                      "supported")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        kw = dict(dtype=dtype, device=device)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(flow.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(flow.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(flow.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(flow.empty(embed_dim, self.vdim, **kw))
        if bias:
            self.in_proj_bias = Parameter(flow.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            return (w[:e], bq), (w[e:2 * e], bk), (w[2 * e:], bv)
        return (self.q_proj_weight, bq), (self.k_proj_weight, bk), (self.v_proj_weight, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = query.dim() == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S = key.shape[0]
        h, d = self.num_heads, self.head_dim
        (wq, bq), (wk, bk), (wv, bv) = self._projections()
        q = F.linear(query, wq, bq).reshape(L, N * h, d).transpose(0, 1)
        k = F.linear(key, wk, bk).reshape(S, N * h, d).transpose(0, 1)
        v = F.linear(value, wv, bv).reshape(S, N * h, d).transpose(0, 1)
        scores = flow.matmul(q * (1.0 / math.sqrt(d)), k.transpose(1, 2))  # (N*h, L, S)
        if is_causal and attn_mask is None:
            i = flow.arange(L, device=query.device).reshape(L, 1)
            j = flow.arange(S, device=query.device).reshape(1, S)
            attn_mask = j > i
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                attn_mask = attn_mask.unsqueeze(0)
            elif list(attn_mask.shape) != [N * h, L, S]:
                raise RuntimeError(f"MultiheadAttention: attn_mask of shape "
                                   f"{tuple(attn_mask.shape)} must be ({L}, {S}) or "
                                   f"({N * h}, {L}, {S})")
            scores = (flow.masked_fill(scores, attn_mask, float("-inf"))
                      if attn_mask.dtype == flow.bool else scores + attn_mask)
        if key_padding_mask is not None:
            if list(key_padding_mask.shape) != [N, S]:
                raise RuntimeError(f"MultiheadAttention: key_padding_mask of shape "
                                   f"{tuple(key_padding_mask.shape)} must be ({N}, {S})")
            pad = key_padding_mask.reshape(N, 1, 1, S)
            s4 = scores.reshape(N, h, L, S)
            s4 = (flow.masked_fill(s4, pad, float("-inf")) if pad.dtype == flow.bool
                  else s4 + pad)
            scores = s4.reshape(N * h, L, S)
        attn = F.softmax(scores, -1)
        if self.dropout > 0.0:
            attn = F.dropout(attn, self.dropout, self.training)
        out = flow.matmul(attn, v).transpose(0, 1).reshape(L, N, E)
        out = self.out_proj(out)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        w = attn.reshape(N, h, L, S)
        w = w.mean(dim=1) if average_attn_weights else w
        return out, (w if batched else w.squeeze(0))


def _activation(name):
    if callable(name):
        return name
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"TransformerEncoderLayer: activation should be relu/gelu, not {name}")


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, device=None,
                 dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, got "
                            f"{type(encoder_layer).__name__}")
        num_layers = _int_arg(num_layers, "TransformerEncoder", "num_layers")
        # Every copy's parameters together, checked before copying (num_layers = 2**62 would
        # otherwise copy for ever); a layer without parameters counts as one element.
        numel = max(1, sum(p.numel() for p in encoder_layer.parameters()))
        _check_tensor_size("TransformerEncoder", (num_layers, numel))
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return out if self.norm is None else self.norm(out)
