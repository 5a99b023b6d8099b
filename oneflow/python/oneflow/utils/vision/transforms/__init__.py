"""torchvision's transforms: Compose, ToTensor, Normalize, Resize, CenterCrop, RandomCrop,
RandomHorizontalFlip, RandomVerticalFlip, Pad, Lambda, ToPILImage (also as flowvision.transforms).

    from oneflow.utils.vision import transforms
    train = transforms.Compose([
        transforms.RandomCrop(32, padding=4),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    ])

They take what the datasets give: PIL images (flowvision's datasets, when Pillow is installed),
(H, W[, C]) numpy arrays (without Pillow) or oneflow tensors (..., C, H, W; oneflow.utils.vision's
datasets give these, and ToTensor passes them through). Random transforms draw from oneflow's
generator (flow.rand / flow.randint), so flow.manual_seed makes them repeat; DataLoader workers
seed it per worker, as PyTorch does.
"""
import numbers

import oneflow as flow
from oneflow.utils.vision.transforms import functional as F
from oneflow.utils.vision.transforms.functional import InterpolationMode

__all__ = [
    "CenterCrop", "Compose", "InterpolationMode", "Lambda", "Normalize", "Pad", "RandomCrop",
    "RandomHorizontalFlip", "RandomVerticalFlip", "Resize", "ToPILImage", "ToTensor", "functional",
]


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
    """A PIL image or (H, W[, C]) numpy array -> (C, H, W) tensor; uint8 values become float32
    in [0, 1], other dtypes are kept (torchvision's rules). Tensors pass through unchanged."""

    def __call__(self, pic):
        return F.to_tensor(pic)

    def __repr__(self):
        return "ToTensor()"


class ToPILImage:
    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)

    def __repr__(self):
        return f"ToPILImage(mode={self.mode})" if self.mode else "ToPILImage()"


class Normalize:
    """``(image - mean[c]) / std[c]`` for each channel c of a float (..., C, H, W) tensor."""

    def __init__(self, mean, std, inplace=False):
        self.mean = [float(m) for m in mean] if hasattr(mean, "__iter__") else [float(mean)]
        self.std = [float(s) for s in std] if hasattr(std, "__iter__") else [float(std)]
        if any(s == 0 for s in self.std):
            raise ValueError(f"Normalize: std must be non-zero in every channel, got std={self.std}")
        self.inplace = inplace  # accepted for compatibility; a new tensor is always returned

    def __call__(self, tensor):
        try:
            return F.normalize(tensor, self.mean, self.std)
        except (TypeError, ValueError) as e:
            raise type(e)(str(e).replace("normalize:", "Normalize:", 1)) from None

    def __repr__(self):
        return f"Normalize(mean={self.mean}, std={self.std})"


def _size(op, size):
    if isinstance(size, numbers.Number):
        return (int(size), int(size))
    if isinstance(size, (list, tuple)) and len(size) in (1, 2):
        return (int(size[0]), int(size[-1]))
    raise ValueError(f"{op}: size must be an int or a sequence of 1 or 2 ints, got {size!r}")


class Resize:
    """Resizes to size: an int sets the shorter edge (keeping the aspect ratio), (h, w) both."""

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=None):
        if not isinstance(size, int) and not (isinstance(size, (list, tuple)) and len(size) in (1, 2)):
            raise TypeError(f"Resize: size must be an int or a sequence of 1 or 2 ints, got {size!r}")
        self.size = size
        self.interpolation = F._interpolation("Resize", interpolation)
        self.max_size = max_size
        self.antialias = antialias

    def __call__(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def __repr__(self):
        return (f"Resize(size={self.size}, interpolation={self.interpolation.value}, "
                f"max_size={self.max_size}, antialias={self.antialias})")


class CenterCrop:
    def __init__(self, size):
        self.size = _size("CenterCrop", size)

    def __call__(self, img):
        return F.center_crop(img, self.size)

    def __repr__(self):
        return f"CenterCrop(size={self.size})"


class Pad:
    def __init__(self, padding, fill=0, padding_mode="constant"):
        F._padding_ltrb(padding)  # checked now, not at the first image
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"Pad: padding_mode must be constant, edge, reflect or symmetric, got {padding_mode!r}")
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)

    def __repr__(self):
        return f"Pad(padding={self.padding}, fill={self.fill}, padding_mode={self.padding_mode})"


class RandomCrop:
    """A random (h, w) box, after optional padding (CIFAR's ``RandomCrop(32, padding=4)``);
    pad_if_needed pads an image smaller than the box."""

    @staticmethod
    def get_params(img, output_size):
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: crop size {(th, tw)} is larger than the image size {(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = int(flow.randint(0, h - th + 1, (1,)).item())
        j = int(flow.randint(0, w - tw + 1, (1,)).item())
        return i, j, th, tw

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size = _size("RandomCrop", size)
        if padding is not None:
            F._padding_ltrb(padding)
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    def __call__(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, height, width = F.get_dimensions(img)
        if self.pad_if_needed and width < self.size[1]:
            img = F.pad(img, [self.size[1] - width, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and height < self.size[0]:
            img = F.pad(img, [0, self.size[0] - height], self.fill, self.padding_mode)
        i, j, h, w = self.get_params(img, self.size)
        return F.crop(img, i, j, h, w)

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if flow.rand(1).item() < self.p:
            return F.hflip(img)
        return img

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


class RandomVerticalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if flow.rand(1).item() < self.p:
            return F.vflip(img)
        return img

    def __repr__(self):
        return f"RandomVerticalFlip(p={self.p})"


class Lambda:
    """Applies a user function."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError(f"Lambda: expected a callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, image):
        return self.lambd(image)

    def __repr__(self):
        return "Lambda()"
