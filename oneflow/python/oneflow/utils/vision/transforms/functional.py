"""Image functions behind the transforms, with torchvision's names and rules.

    from oneflow.utils.vision.transforms import functional as F
    F.resize(image, 36); F.center_crop(image, 32); F.hflip(image); F.to_tensor(image)

An image is a PIL image (when Pillow is installed), a numpy array laid out (H, W) or (H, W, C)
as the datasets give it without Pillow, or a oneflow tensor (..., C, H, W). Every function
returns the kind it got (to_tensor excepted). PIL images are resized by Pillow itself, so the
results match torchvision's; tensors and arrays are resized by the bilinear or nearest rule of
PyTorch's ``interpolate(..., align_corners=False)`` without antialiasing (torchvision's tensor
default). numpy and Pillow are imported when first needed, not with oneflow.
"""
import enum
import numbers

import oneflow as flow


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


# PIL's resampling constants, which torchvision also accepts (deprecated) as interpolation.
_FROM_PIL_INT = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR,
                 3: InterpolationMode.BICUBIC, 4: InterpolationMode.BOX,
                 5: InterpolationMode.HAMMING, 1: InterpolationMode.LANCZOS}
_TO_PIL_INT = {mode: code for code, mode in _FROM_PIL_INT.items()}


def _pil():
    """PIL.Image, or None when Pillow is not installed."""
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def _is_pil(img):
    # Checked by module name: importing Pillow only to learn that an image is not one costs time.
    return type(img).__module__.startswith("PIL.") and _pil() is not None and isinstance(img, _pil().Image)


def _is_numpy(img):
    return type(img).__module__ == "numpy" and hasattr(img, "ndim")


def _kind(op, img):
    if isinstance(img, flow.Tensor):
        return "tensor"
    if _is_pil(img):
        return "pil"
    if _is_numpy(img):
        if img.ndim not in (2, 3):
            raise ValueError(f"{op}: expected a numpy image of shape (H, W) or (H, W, C), got shape {img.shape}")
        return "numpy"
    raise TypeError(f"{op}: expected a PIL image, a numpy array or a oneflow tensor, got {type(img).__name__}")


def _as_hwc(img):
    import numpy as np

    array = np.asarray(img)
    return array[:, :, None] if array.ndim == 2 else array


def _like(img, kind, hwc):
    """hwc (numpy, H x W x C) back to the kind of img."""
    if kind == "pil":
        return _pil().fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc, mode=img.mode)
    if kind == "numpy":
        return hwc[:, :, 0] if img.ndim == 2 else hwc
    raise AssertionError(kind)


def _tensor_array(img):
    return img.detach().numpy()


def _tensor_like(img, array):
    import numpy as np

    return flow.tensor(np.ascontiguousarray(array), dtype=img.dtype)


def get_dimensions(img):
    """[channels, height, width] of an image."""
    kind = _kind("get_dimensions", img)
    if kind == "tensor":
        if img.dim() < 2:
            raise ValueError(f"get_dimensions: expected a tensor of shape (..., H, W), got shape {tuple(img.shape)}")
        channels = 1 if img.dim() == 2 else img.shape[-3]
        return [channels, img.shape[-2], img.shape[-1]]
    if kind == "pil":
        return [len(img.getbands()), img.height, img.width]
    return [1 if img.ndim == 2 else img.shape[2], img.shape[0], img.shape[1]]


def _pair(op, name, value):
    if isinstance(value, numbers.Number):
        return int(value), int(value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        return int(value[0]), int(value[0])
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return int(value[0]), int(value[1])
    raise ValueError(f"{op}: {name} must be an int or a sequence of 1 or 2 ints, got {value!r}")


# ----------------------------------------------------------------------------- conversions
def to_tensor(pic):
    """A PIL image or an (H, W[, C]) numpy array -> a (C, H, W) tensor; uint8 values become
    float32 in [0, 1], other dtypes are kept. A tensor passes through unchanged (oneflow's
    datasets already give tensors)."""
    import numpy as np

    if isinstance(pic, flow.Tensor):
        return pic
    kind = _kind("to_tensor", pic)
    if kind == "pil":
        dtype = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
        array = np.array(pic, dtype=dtype)
        if pic.mode == "1":
            array = array * np.uint8(255)
        array = array.reshape(pic.height, pic.width, len(pic.getbands()))
    else:
        array = _as_hwc(pic)
    chw = np.ascontiguousarray(array.transpose(2, 0, 1))
    if chw.dtype == np.uint8:
        out = chw.astype(np.float32)
        out /= np.float32(255)
        return flow.tensor(out, dtype=flow.float32)
    return flow.tensor(chw)


def to_pil_image(pic, mode=None):
    """A (C, H, W) tensor or an (H, W[, C]) array -> a PIL image; float values in [0, 1] are
    scaled to bytes, as torchvision does."""
    import numpy as np

    Image = _pil()
    if Image is None:
        raise ImportError("to_pil_image: Pillow is not installed (apt-get install python3-pil)")
    if _is_pil(pic):
        return pic if mode is None else pic.convert(mode)
    if isinstance(pic, flow.Tensor):
        if pic.dim() not in (2, 3):
            raise ValueError(f"to_pil_image: expected a (C, H, W) tensor, got shape {tuple(pic.shape)}")
        array = _tensor_array(pic)
        array = array[None] if array.ndim == 2 else array
        if array.dtype.kind == "f":
            array = (array * 255).astype(np.uint8)  # torchvision: mul(255).byte(), truncating
        array = array.transpose(1, 2, 0)
    else:
        array = _as_hwc(np.asarray(pic))
    if array.shape[2] == 1:
        array = array[:, :, 0]
    return Image.fromarray(array, mode=mode)


def normalize(tensor, mean, std, inplace=False):
    """(tensor - mean[c]) / std[c] for every channel c of a float (..., C, H, W) tensor, in the
    tensor's dtype (subtract, then divide, as torchvision)."""
    import numpy as np

    if not isinstance(tensor, flow.Tensor) and not _is_numpy(tensor):
        raise TypeError(f"normalize: expected a tensor, got {type(tensor).__name__}; apply ToTensor first")
    array = _tensor_array(tensor) if isinstance(tensor, flow.Tensor) else np.asarray(tensor)
    if array.ndim < 3:
        raise ValueError(f"normalize: expected a (..., C, H, W) image, got shape {array.shape}")
    if array.dtype.kind != "f":
        raise TypeError(f"normalize: expected a float image, got dtype {array.dtype}; apply ToTensor first")
    channels = array.shape[-3]
    mean = [float(m) for m in mean] if hasattr(mean, "__iter__") else [float(mean)]
    std = [float(s) for s in std] if hasattr(std, "__iter__") else [float(std)]
    for label, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise ValueError(f"normalize: {label} has {len(values)} values but the image has {channels} channels")
    if any(s == 0 for s in std):
        raise ValueError(f"normalize: std must be non-zero in every channel, got std={std}")
    m = np.asarray(mean, dtype=array.dtype).reshape(-1, 1, 1)
    s = np.asarray(std, dtype=array.dtype).reshape(-1, 1, 1)
    out = (array - m) / s
    return flow.tensor(out, dtype=tensor.dtype) if isinstance(tensor, flow.Tensor) else out


# ----------------------------------------------------------------------------- geometry
def resized_output_size(image_size, size, max_size=None):
    """(new_h, new_w) for torchvision's size rule: an int (or [int]) sets the shorter edge and
    keeps the aspect ratio (the longer edge rounds down), (h, w) sets both."""
    h, w = image_size
    if isinstance(size, int) or len(size) == 1:
        requested = size if isinstance(size, int) else size[0]
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = requested, int(requested * long / short)
        if max_size is not None:
            if max_size <= requested:
                raise ValueError(f"resize: max_size={max_size} must be larger than the requested "
                                 f"shorter edge {requested}")
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        return (new_long, new_short) if w <= h else (new_short, new_long)
    if max_size is not None:
        raise ValueError(f"resize: max_size needs size to be an int (the shorter edge), got size={list(size)}")
    return int(size[0]), int(size[1])


def _interpolation(op, interpolation):
    if isinstance(interpolation, int) and not isinstance(interpolation, bool):
        if interpolation not in _FROM_PIL_INT:
            raise ValueError(f"{op}: unknown interpolation {interpolation}")
        return _FROM_PIL_INT[interpolation]
    if isinstance(interpolation, str):
        interpolation = InterpolationMode(interpolation)
    if not isinstance(interpolation, InterpolationMode):
        raise TypeError(f"{op}: interpolation must be an InterpolationMode, got {interpolation!r}")
    return interpolation


def _source_index(out_size, in_size):
    """PyTorch's align_corners=False source coordinates: (i + 0.5) * scale - 0.5, clamped at 0."""
    import numpy as np

    scale = in_size / out_size
    src = (np.arange(out_size, dtype=np.float64) + 0.5) * scale - 0.5
    return np.maximum(src, 0.0), scale


def _resize_array(array, out_h, out_w, mode, h_axis):
    """Bilinear or nearest resize of a numpy array along axes (h_axis, h_axis + 1)."""
    import numpy as np

    in_h, in_w = array.shape[h_axis], array.shape[h_axis + 1]
    work = array.astype(np.float32) if array.dtype.kind != "f" else array
    if mode is InterpolationMode.NEAREST:
        rows = np.minimum((np.arange(out_h) * (in_h / out_h)).astype(np.int64), in_h - 1)
        cols = np.minimum((np.arange(out_w) * (in_w / out_w)).astype(np.int64), in_w - 1)
        out = np.take(np.take(work, rows, axis=h_axis), cols, axis=h_axis + 1)
    elif mode is InterpolationMode.BILINEAR:
        def along(a, out_n, in_n, axis):
            src, _ = _source_index(out_n, in_n)
            i0 = np.minimum(np.floor(src).astype(np.int64), in_n - 1)
            i1 = np.minimum(i0 + 1, in_n - 1)
            lam = (src - i0).astype(a.dtype)
            shape = [1] * a.ndim
            shape[axis] = out_n
            lam = lam.reshape(shape)
            return np.take(a, i0, axis=axis) * (1 - lam) + np.take(a, i1, axis=axis) * lam

        out = along(along(work, out_h, in_h, h_axis), out_w, in_w, h_axis + 1)
    else:
        raise ValueError(f"resize: {mode.name} interpolation needs a PIL image; tensors and arrays "
                         "take NEAREST or BILINEAR")
    if array.dtype.kind in "ui":  # torchvision rounds integer images back
        info = np.iinfo(array.dtype)
        out = np.clip(np.round(out), info.min, info.max)
    return out.astype(array.dtype)


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=None):
    """Resizes to size (see resized_output_size); an image already that size is returned as is."""
    kind = _kind("resize", img)
    if isinstance(size, (list, tuple)) and len(size) not in (1, 2):
        raise ValueError(f"resize: size must be an int or a sequence of 1 or 2 ints, got {list(size)}")
    mode = _interpolation("resize", interpolation)
    _, h, w = get_dimensions(img)
    out_h, out_w = resized_output_size((h, w), size, max_size)
    if (out_h, out_w) == (h, w):
        return img
    if kind == "pil" or (kind == "numpy" and _pil() is not None and img.dtype.name == "uint8"):
        pil = img if kind == "pil" else to_pil_image(img)
        out = pil.resize((out_w, out_h), _TO_PIL_INT[mode])
        return out if kind == "pil" else _like(img, kind, _as_hwc(out))
    if kind == "numpy":
        return _like(img, kind, _resize_array(_as_hwc(img), out_h, out_w, mode, 0))
    array = _tensor_array(img)
    return _tensor_like(img, _resize_array(array, out_h, out_w, mode, array.ndim - 2))


def crop(img, top, left, height, width):
    """The (height, width) box at (top, left); parts outside the image are zeros."""
    kind = _kind("crop", img)
    _, h, w = get_dimensions(img)
    if top < 0 or left < 0 or top + height > h or left + width > w:
        # torchvision pads what falls outside with zeros.
        pad_ltrb = [max(-left, 0), max(-top, 0), max(left + width - w, 0), max(top + height - h, 0)]
        img = pad(img, pad_ltrb, fill=0)
        top, left = max(top, 0), max(left, 0)
    if kind == "pil":
        return img.crop((left, top, left + width, top + height))
    if kind == "numpy":
        return img[top:top + height, left:left + width].copy()
    return img[..., top:top + height, left:left + width].contiguous()


def center_crop(img, output_size):
    """The middle (h, w) box (rounded as torchvision); a smaller image is zero-padded first."""
    crop_h, crop_w = _pair("center_crop", "output_size", output_size)
    _, h, w = get_dimensions(img)
    if crop_w > w or crop_h > h:
        pad_ltrb = [(crop_w - w) // 2 if crop_w > w else 0, (crop_h - h) // 2 if crop_h > h else 0,
                    (crop_w - w + 1) // 2 if crop_w > w else 0, (crop_h - h + 1) // 2 if crop_h > h else 0]
        img = pad(img, pad_ltrb, fill=0)
        _, h, w = get_dimensions(img)
        if (crop_h, crop_w) == (h, w):
            return img
    top = int(round((h - crop_h) / 2.0))
    left = int(round((w - crop_w) / 2.0))
    return crop(img, top, left, crop_h, crop_w)


def _padding_ltrb(padding):
    if isinstance(padding, numbers.Number):
        p = int(padding)
        return [p, p, p, p]
    if isinstance(padding, (list, tuple)):
        if len(padding) == 1:
            return [int(padding[0])] * 4
        if len(padding) == 2:
            return [int(padding[0]), int(padding[1]), int(padding[0]), int(padding[1])]
        if len(padding) == 4:
            return [int(p) for p in padding]
    raise ValueError(f"pad: padding must be an int or a sequence of 1, 2 or 4 ints, got {padding!r}")


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pads the borders: padding is all sides, (left/right, top/bottom) or (left, top, right,
    bottom); padding_mode constant (with fill, one value or one per channel), edge, reflect or
    symmetric. Negative padding crops."""
    import numpy as np

    kind = _kind("pad", img)
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError(f"pad: padding_mode must be constant, edge, reflect or symmetric, got {padding_mode!r}")
    left, top, right, bottom = _padding_ltrb(padding)
    channels, h, w = get_dimensions(img)
    # Negative padding crops first (torchvision's rule), then the rest pads.
    ct, cl = max(-top, 0), max(-left, 0)
    cb, cr = max(-bottom, 0), max(-right, 0)
    left, top, right, bottom = max(left, 0), max(top, 0), max(right, 0), max(bottom, 0)
    if kind == "tensor":
        array = _tensor_array(img)[..., ct:h - cb, cl:w - cr]
        h_axis = array.ndim - 2
    else:
        array = _as_hwc(img)[ct:h - cb, cl:w - cr]
        h_axis = 0
    widths = [(0, 0)] * array.ndim
    widths[h_axis] = (top, bottom)
    widths[h_axis + 1] = (left, right)
    if padding_mode == "constant":
        fills = list(fill) if isinstance(fill, (list, tuple)) else [fill]
        if len(fills) not in (1, channels):
            raise ValueError(f"pad: fill has {len(fills)} values but the image has {channels} channels")
        if len(fills) == 1:
            out = np.pad(array, widths, mode="constant", constant_values=np.asarray(fills[0]).astype(array.dtype))
        else:
            c_axis = 2 if kind != "tensor" else array.ndim - 3
            parts = [np.pad(np.take(array, [c], axis=c_axis), widths, mode="constant",
                            constant_values=np.asarray(v).astype(array.dtype)) for c, v in enumerate(fills)]
            out = np.concatenate(parts, axis=c_axis)
    else:
        out = np.pad(array, widths, mode=padding_mode)
    if kind == "tensor":
        return _tensor_like(img, out)
    return _like(img, kind, out)


def hflip(img):
    """Mirrors left to right."""
    kind = _kind("hflip", img)
    if kind == "pil":
        return img.transpose(_pil().FLIP_LEFT_RIGHT)
    if kind == "numpy":
        return img[:, ::-1].copy()
    return _tensor_like(img, _tensor_array(img)[..., ::-1])


def vflip(img):
    """Mirrors top to bottom."""
    kind = _kind("vflip", img)
    if kind == "pil":
        return img.transpose(_pil().FLIP_TOP_BOTTOM)
    if kind == "numpy":
        return img[::-1].copy()
    return _tensor_like(img, _tensor_array(img)[..., ::-1, :])
