"""A minimal set of torchvision-style transforms: Compose, ToTensor, Normalize, Lambda.

The datasets in ``oneflow.utils.vision.datasets`` already return float32
(C, H, W) tensors in [0, 1], so ``ToTensor`` passes tensors through and
tutorial pipelines such as ``Compose([ToTensor(), Normalize(mean, std)])``
work unchanged.
"""
import oneflow as flow


class Compose:
    """Applies transforms in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, image):
        for transform in self.transforms:
            image = transform(image)
        return image

    def __repr__(self):
        inner = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({inner}\n)"


class ToTensor:
    """Tensors are returned unchanged. A numpy array (or PIL image) of shape
    (H, W) or (H, W, C) becomes a (C, H, W) tensor; uint8 values are scaled to
    float32 in [0, 1], other dtypes are kept, as in torchvision."""

    def __call__(self, pic):
        if isinstance(pic, flow.Tensor):
            return pic
        import numpy as np

        array = np.asarray(pic)
        if array.ndim == 2:
            array = array[:, :, None]
        if array.ndim != 3:
            raise ValueError(f"ToTensor: expected an image of shape (H, W) or (H, W, C), got shape {array.shape}")
        chw = np.ascontiguousarray(array.transpose(2, 0, 1))
        if chw.dtype == np.uint8:
            chw = chw.astype(np.float32)
            chw /= np.float32(255)
            return flow.tensor(chw, dtype=flow.float32)
        return flow.tensor(chw)

    def __repr__(self):
        return "ToTensor()"


class Normalize:
    """``(image - mean[c]) / std[c]`` for each channel c of a float (..., C, H, W) tensor."""

    def __init__(self, mean, std, inplace=False):
        self.mean = [float(m) for m in mean] if hasattr(mean, "__iter__") else [float(mean)]
        self.std = [float(s) for s in std] if hasattr(std, "__iter__") else [float(std)]
        if any(s == 0 for s in self.std):
            raise ValueError(f"Normalize: std must be non-zero in every channel, got std={self.std}")
        self.inplace = inplace  # accepted for compatibility; a new tensor is always returned

    def __call__(self, tensor):
        import numpy as np

        array = tensor.numpy() if isinstance(tensor, flow.Tensor) else np.asarray(tensor)
        if array.ndim < 3:
            raise ValueError(f"Normalize: expected a (..., C, H, W) image, got shape {array.shape}")
        if array.dtype.kind != "f":
            raise TypeError(
                f"Normalize: expected a float image, got dtype {array.dtype}; apply ToTensor first"
            )
        channels = array.shape[-3]
        for label, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ValueError(
                    f"Normalize: {label} has {len(values)} values but the image has {channels} channels"
                )
        # Computed in the image's dtype, as torchvision does (sub then div).
        mean = np.asarray(self.mean, dtype=array.dtype).reshape(-1, 1, 1)
        std = np.asarray(self.std, dtype=array.dtype).reshape(-1, 1, 1)
        out = (array - mean) / std
        if out.dtype == np.float32:
            return flow.tensor(out, dtype=flow.float32)
        return flow.tensor(out)

    def __repr__(self):
        return f"Normalize(mean={self.mean}, std={self.std})"


class Lambda:
    """Applies a user function."""

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"Lambda: expected a callable, got {type(fn).__name__}")
        self.fn = fn

    def __call__(self, image):
        return self.fn(image)

    def __repr__(self):
        return "Lambda()"
