"""VisionDataset (torchvision's base class) and the helpers the datasets share: finding files a
user put on disk, and the one-line error when they are not there.

    class MyData(VisionDataset):
        def __init__(self, root, transform=None):
            super().__init__(root, transform=transform)

There is no network here: ``download=True`` uses files already present (the extracted files or
the archive as downloaded) and otherwise fails the way ``download=False`` does, naming the
missing files and the folder to put them in. Checksums are not checked: files a user put there
are read, and a malformed file fails with a line naming it.
"""
import os

from oneflow.utils.data.dataset import Dataset

NO_NETWORK = "there is no network, so download=True only uses files already there"


def _pil_image():
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def to_image(array, mode=None):
    """A uint8 (H, W) or (H, W, 3) array as the item image: a PIL image, as torchvision gives,
    when Pillow is installed, else the array itself (ToTensor takes both)."""
    Image = _pil_image()
    if Image is None:
        return array
    return Image.fromarray(array, mode=mode)


def missing_error(name, missing, folder, also=None, source=None):
    """FileNotFoundError in one line: which files, which folder, and what to do."""
    where = folder if also is None else f"{folder} (nor {also})"
    origin = f"from {source}; " if source else ""
    return FileNotFoundError(
        f"{name}: cannot find {', '.join(missing)} in {where}; put the files there "
        f"({origin}{NO_NETWORK})"
    )


class VisionDataset(Dataset):
    _repr_indent = 4

    def __init__(self, root, transforms=None, transform=None, target_transform=None):
        self.root = os.path.expanduser(os.fspath(root)) if root is not None else None
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError(f"{type(self).__name__}: pass either transforms or transform/target_transform, not both")
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms

    def _apply(self, img, target):
        if self.transforms is not None:
            return self.transforms(img, target)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def extra_repr(self):
        return ""

    def __repr__(self):
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        for head, t in (("Transform: ", self.transform), ("Target transform: ", self.target_transform)):
            if t is not None:
                lines = repr(t).splitlines()
                body += [head + lines[0]] + [" " * len(head) + line for line in lines[1:]]
        return "\n".join([f"Dataset {type(self).__name__}"] + [" " * self._repr_indent + l for l in body])
