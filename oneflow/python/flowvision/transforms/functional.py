"""torchvision.transforms.functional's names (implemented in oneflow.utils.vision.transforms).

    import flowvision.transforms.functional as F
    F.hflip(F.center_crop(image, 28))
"""
from oneflow.utils.vision.transforms.functional import (  # noqa: F401
    InterpolationMode, center_crop, crop, get_dimensions, hflip, normalize, pad, resize,
    resized_output_size, to_pil_image, to_tensor, vflip,
)
