"""Padding variable-length sequences into one batch.

    x = nn.utils.rnn.pad_sequence([a, b, c], batch_first=True)   # (3, longest, *trailing)
"""

import oneflow as flow


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Stacks tensors of shape (L_i, *trailing) into (longest, batch, *trailing) (or
    (batch, longest, *trailing) with batch_first), filling with padding_value; differentiable."""
    sequences = list(sequences)  # a list, or a tensor's rows
    if len(sequences) == 0:
        raise ValueError("pad_sequence: got an empty list of sequences")
    for i, s in enumerate(sequences):
        if not isinstance(s, flow.Tensor):
            raise TypeError(f"pad_sequence: sequence {i} is a {type(s).__name__}, expected a Tensor")
        if s.dim() == 0:
            raise ValueError(f"pad_sequence: sequence {i} is 0-dimensional; sequences need a length dimension")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if tuple(s.shape[1:]) != trailing:
            raise ValueError(
                f"pad_sequence: sequence {i} has trailing shape {tuple(s.shape[1:])} but sequence 0 "
                f"has {trailing}; all must match"
            )
    longest = max(s.shape[0] for s in sequences)
    dtype, device = sequences[0].dtype, sequences[0].device
    padded = []
    for s in sequences:
        s = s.to(dtype)
        missing = longest - s.shape[0]
        if missing > 0:
            fill = flow.full((missing,) + trailing, padding_value, dtype=dtype, device=device)
            s = flow.cat([s, fill], dim=0)
        padded.append(s)
    return flow.stack(padded, dim=0 if batch_first else 1)
