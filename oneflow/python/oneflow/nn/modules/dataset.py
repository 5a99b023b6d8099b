"""OneFlow's data-pipeline modules that make tensors from nothing: CoinFlip (Bernoulli draws,
one per sample of a batch), local or global."""

import oneflow as flow
from oneflow.nn.modules.module import Module


class CoinFlip(Module):
    """m() -> int8 tensor of batch_size values, each 1 with the given probability (OneFlow's
    nn.CoinFlip). random_seed None or negative draws from the default generator; a seed makes the
    draws repeat. With placement and sbp the result is global (every rank draws the whole batch
    from the same generator state and keeps its piece)."""

    def __init__(self, batch_size=1, random_seed=None, probability=0.5, device=None,
                 placement=None, sbp=None):
        super().__init__()
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"CoinFlip: batch_size must be a positive int, got {batch_size!r}")
        if not 0.0 <= float(probability) <= 1.0:
            raise ValueError(f"CoinFlip: probability must be in [0, 1], got {probability}")
        if (placement is None) != (sbp is None):
            raise ValueError("CoinFlip: give placement and sbp together (a global result), or neither")
        if placement is not None and device is not None:
            raise ValueError("CoinFlip: give device (a local result) or placement and sbp, not both")
        self.batch_size, self.probability = batch_size, float(probability)
        self.device, self.placement, self.sbp = device, placement, sbp
        self.generator = None
        if random_seed is not None and random_seed >= 0:
            self.generator = flow.Generator()
            self.generator.manual_seed(random_seed)

    def forward(self):
        if self.placement is not None:
            u = flow.rand(self.batch_size, generator=self.generator, placement=self.placement,
                          sbp=self.sbp)
        else:
            u = flow.rand(self.batch_size, generator=self.generator, device=self.device)
        return (u < self.probability).to(flow.int8)


class OFRecordReader(Module):
    """OneFlow's OFRecord data reader is not part of this build: constructing one is refused in
    one line (read data with oneflow.utils.data instead)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("nn.OFRecordReader: OneFlow's OFRecord reader is not supported by this "
                                  "build; read data with oneflow.utils.data.DataLoader")
