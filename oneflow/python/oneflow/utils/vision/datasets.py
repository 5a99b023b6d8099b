"""MNIST, FashionMNIST and CIFAR10 read from local files (torchvision's names).

Each file is read once into a uint8 tensor (``dataset.data``); an item is
converted to float32 in [0, 1] when it is fetched, so a dataset costs one byte
per pixel in memory. Items are ``(image, label)`` with ``image`` a float32
tensor of shape (C, H, W) (after ``transform``, if given) and ``label`` an int.

Nothing is ever downloaded: a missing file raises ``FileNotFoundError`` that
says which files to put where. ``download=True`` is accepted for
compatibility and changes nothing.
"""
import os
import struct

import oneflow as flow
from oneflow.utils.data.dataset import Dataset

_IDX_IMAGES_MAGIC = 0x00000803  # idx3: unsigned byte, 3 dimensions
_IDX_LABELS_MAGIC = 0x00000801  # idx1: unsigned byte, 1 dimension

_CIFAR_IMAGE_BYTES = 3 * 32 * 32
_CIFAR_RECORD_BYTES = 1 + _CIFAR_IMAGE_BYTES  # label byte, then R, G, B planes


def _read_file(path):
    if path.endswith(".gz"):
        import gzip  # only when needed: keeps `import oneflow` fast

        with gzip.open(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def _to_unit_float(image_u8, shape):
    """uint8 tensor -> float32 tensor of `shape` with values / 255 (torchvision's ToTensor)."""
    import numpy as np

    array = image_u8.numpy().astype(np.float32).reshape(shape)
    array /= np.float32(255)
    return flow.tensor(array, dtype=flow.float32)


def parse_idx_images(name, path, raw):
    """(n, rows, cols) from the header of an idx3 image file's bytes, checked against its size."""
    if len(raw) < 16:
        raise ValueError(f"{name}: {path} is not an idx3 image file: only {len(raw)} bytes")
    magic, n, rows, cols = struct.unpack(">IIII", raw[:16])
    if magic != _IDX_IMAGES_MAGIC:
        raise ValueError(
            f"{name}: {path} is not an idx3 image file: magic number 0x{magic:08x}, "
            f"expected 0x{_IDX_IMAGES_MAGIC:08x}"
        )
    expected = 16 + n * rows * cols
    if len(raw) != expected:
        raise ValueError(
            f"{name}: {path} has {len(raw)} bytes but its header ({n} images of "
            f"{rows}x{cols}) needs {expected}"
        )
    return n, rows, cols


def parse_idx_labels(name, path, raw):
    """The number of labels in an idx1 label file's bytes, checked against its size."""
    if len(raw) < 8:
        raise ValueError(f"{name}: {path} is not an idx1 label file: only {len(raw)} bytes")
    magic, n = struct.unpack(">II", raw[:8])
    if magic != _IDX_LABELS_MAGIC:
        raise ValueError(
            f"{name}: {path} is not an idx1 label file: magic number 0x{magic:08x}, "
            f"expected 0x{_IDX_LABELS_MAGIC:08x}"
        )
    if len(raw) != 8 + n:
        raise ValueError(f"{name}: {path} has {len(raw)} bytes but its header ({n} labels) needs {8 + n}")
    return n


class _IdxDataset(Dataset):
    """The idx format of MNIST and Fashion-MNIST; subclasses name the files."""

    name = None  # also the folder under root: root/<name>/raw, as torchvision
    source = None
    classes = []
    files = {
        True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root = os.path.expanduser(os.fspath(root))
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        images_name, labels_name = self.files[bool(train)]
        images_path = self._find(images_name)
        labels_path = self._find(labels_name)

        images = _read_file(images_path)
        n, rows, cols = self._parse_images_header(images_path, images)
        labels = _read_file(labels_path)
        n_labels = self._parse_labels_header(labels_path, labels)
        if n != n_labels:
            raise ValueError(
                f"{self.name}: {images_path} holds {n} images but {labels_path} holds {n_labels} labels"
            )
        self.data = flow._C.from_bytes(images[16:], (n, rows, cols), flow.uint8)
        # Labels stay as bytes for fast int lookup per item; targets is the
        # tensor torchvision exposes.
        self._labels = labels[8:]
        self.targets = flow.tensor(list(self._labels), dtype=flow.int64)
        self._image_shape = (1, rows, cols)

    def _find(self, filename):
        folders = [self.root, os.path.join(self.root, self.name, "raw")]
        for folder in folders:
            for candidate in (filename, filename + ".gz"):
                path = os.path.join(folder, candidate)
                if os.path.isfile(path):
                    return path
        all_files = ", ".join(name for pair in self.files.values() for name in pair)
        raise FileNotFoundError(
            f"{self.name}: missing {filename} (or {filename}.gz) in {folders[0]} or {folders[1]}; "
            f"put the {self.name} idx files ({all_files}, optionally gzipped, from {self.source}) "
            f"under {folders[1]}; this build never downloads"
        )

    def _parse_images_header(self, path, raw):
        return parse_idx_images(self.name, path, raw)

    def _parse_labels_header(self, path, raw):
        return parse_idx_labels(self.name, path, raw)

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, index):
        target = self._labels[index]  # first: raises IndexError past the end, ending `for x in ds`
        image = _to_unit_float(self.data[index], self._image_shape)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self):
        split = "Train" if self.train else "Test"
        return f"Dataset {self.name}\n    Number of datapoints: {len(self)}\n    Root location: {self.root}\n    Split: {split}"


class MNIST(_IdxDataset):
    """Handwritten digits, 28x28 grey: items are (float32 (1, 28, 28) in [0, 1], int label).

    Reads ``train-images-idx3-ubyte``/``train-labels-idx1-ubyte`` (or the
    ``t10k-`` pair when ``train=False``), optionally ``.gz``, from ``root`` or
    ``root/MNIST/raw``."""

    name = "MNIST"
    source = "http://yann.lecun.com/exdb/mnist/"
    classes = [
        "0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
        "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine",
    ]


class FashionMNIST(_IdxDataset):
    """Zalando's clothing images in MNIST's format; files in ``root`` or ``root/FashionMNIST/raw``."""

    name = "FashionMNIST"
    source = "https://github.com/zalandoresearch/fashion-mnist"
    classes = [
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ]


class CIFAR10(Dataset):
    """32x32 colour images in 10 classes: items are (float32 (3, 32, 32) in [0, 1], int label).

    Reads the binary version: ``data_batch_1.bin`` .. ``data_batch_5.bin``
    (train) or ``test_batch.bin`` (test) from ``root/cifar-10-batches-bin`` or
    ``root``. Each record is one label byte and 3072 pixel bytes (the red,
    green and blue 32x32 planes), so ``data`` is uint8 (N, 3, 32, 32) -- channels
    first, unlike torchvision's (N, 32, 32, 3) numpy array. ``targets`` is a
    list of ints, as in torchvision."""

    base_folder = "cifar-10-batches-bin"
    train_list = [f"data_batch_{i}.bin" for i in range(1, 6)]
    test_list = ["test_batch.bin"]
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root = os.path.expanduser(os.fspath(root))
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        filenames = self.train_list if train else self.test_list
        folder = self._find_folder(filenames)

        labels, pixels = [], []
        for filename in filenames:
            path = os.path.join(folder, filename)
            raw = _read_file(path)
            if len(raw) == 0 or len(raw) % _CIFAR_RECORD_BYTES != 0:
                raise ValueError(
                    f"CIFAR10: {path} is not a CIFAR-10 binary batch: {len(raw)} bytes is not a "
                    f"positive multiple of the {_CIFAR_RECORD_BYTES}-byte record"
                )
            # Slicing bytes runs in C: labels are every 3073rd byte, pixels the rest.
            file_labels = raw[0::_CIFAR_RECORD_BYTES]
            if max(file_labels) > 9:
                record = next(i for i, label in enumerate(file_labels) if label > 9)
                raise ValueError(
                    f"CIFAR10: {path} is not a CIFAR-10 binary batch: record {record} has label "
                    f"{file_labels[record]}, expected 0..9"
                )
            labels.append(file_labels)
            pixels.extend(
                raw[start + 1 : start + _CIFAR_RECORD_BYTES]
                for start in range(0, len(raw), _CIFAR_RECORD_BYTES)
            )
        labels = b"".join(labels)
        self.data = flow._C.from_bytes(b"".join(pixels), (len(labels), 3, 32, 32), flow.uint8)
        self.targets = list(labels)

    def _find_folder(self, filenames):
        folders = [os.path.join(self.root, self.base_folder), self.root]
        present = [sum(os.path.isfile(os.path.join(f, name)) for name in filenames) for f in folders]
        for folder, count in zip(folders, present):
            if count == len(filenames):
                return folder
        # Name the first missing file in the folder that looks most complete.
        folder = folders[0] if present[0] >= present[1] else folders[1]
        missing = next(name for name in filenames if not os.path.isfile(os.path.join(folder, name)))
        raise self._missing_error(os.path.join(folder, missing))

    def _missing_error(self, path):
        return FileNotFoundError(
            f"CIFAR10: missing {path}; put the CIFAR-10 binary version (cifar-10-binary.tar.gz "
            f"from https://www.cs.toronto.edu/~kriz/cifar.html, extracted) under {self.root}; "
            "this build never downloads"
        )

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        target = self.targets[index]  # first: raises IndexError past the end
        image = _to_unit_float(self.data[index], (3, 32, 32))
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self):
        split = "Train" if self.train else "Test"
        return f"Dataset CIFAR10\n    Number of datapoints: {len(self)}\n    Root location: {self.root}\n    Split: {split}"
