"""MNIST, FashionMNIST and KMNIST in torchvision's layout: idx files under root/<Name>/raw.

    ds = flowvision.datasets.MNIST(root="data", train=True, transform=transforms.ToTensor(),
                                   download=True)
    image, label = ds[0]          # (1, 28, 28) float32 tensor after ToTensor, int label

Reads ``train-images-idx3-ubyte`` / ``train-labels-idx1-ubyte`` (``t10k-`` for the test split)
from ``root/<Name>/raw`` or ``root``, extracted or still gzipped as downloaded (``.gz``). As in
torchvision, ``data`` is a uint8 tensor (N, 28, 28), ``targets`` an int64 tensor, and an item's
image is a PIL image in mode "L" (a uint8 (28, 28) numpy array when Pillow is not installed).
"""
import os

import oneflow as flow
from flowvision.datasets.vision import VisionDataset, missing_error, to_image
from oneflow.utils.vision.datasets import _read_file, parse_idx_images, parse_idx_labels


class MNIST(VisionDataset):
    mirrors = ["http://yann.lecun.com/exdb/mnist/", "https://ossci-datasets.s3.amazonaws.com/mnist/"]
    files = {
        True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }
    classes = [
        "0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
        "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine",
    ]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False,
                 source_url=None):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        self.download = download  # files already there are used either way (no network)
        self.source_url = source_url
        import numpy as np

        name = type(self).__name__
        images_name, labels_name = self.files[bool(train)]
        paths = self._find([images_name, labels_name])
        images, labels = _read_file(paths[0]), _read_file(paths[1])
        n, rows, cols = parse_idx_images(name, paths[0], images)
        n_labels = parse_idx_labels(name, paths[1], labels)
        if n != n_labels:
            raise ValueError(f"{name}: {paths[0]} holds {n} images but {paths[1]} holds {n_labels} labels")
        self._images = np.frombuffer(images, dtype=np.uint8, offset=16).reshape(n, rows, cols)
        self._labels = np.frombuffer(labels, dtype=np.uint8, offset=8).astype(np.int64)
        self.data = flow._C.from_bytes(images[16:], (n, rows, cols), flow.uint8)
        self.targets = flow.tensor(self._labels, dtype=flow.int64)

    @property
    def raw_folder(self):
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    # torchvision's old names
    train_data = test_data = property(lambda self: self.data)
    train_labels = test_labels = property(lambda self: self.targets)

    def _find(self, names):
        found, missing = [], []
        for filename in names:
            for folder in (self.raw_folder, self.root):
                hits = [os.path.join(folder, c) for c in (filename, filename + ".gz")]
                hits = [p for p in hits if os.path.isfile(p)]
                if hits:
                    found.append(hits[0])
                    break
            else:
                missing.append(f"{filename}[.gz]")
        if missing:
            raise missing_error(type(self).__name__, missing, self.raw_folder, also=self.root,
                                source=self.source_url or self.mirrors[0])
        return found

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, index):
        target = int(self._labels[index])  # first: an index past the end raises IndexError
        return self._apply(to_image(self._images[index], mode="L"), target)

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"


class FashionMNIST(MNIST):
    """Zalando's clothing images in MNIST's format, under root/FashionMNIST/raw."""

    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


class KMNIST(MNIST):
    """Kuzushiji-MNIST (cursive Japanese characters) in MNIST's format, under root/KMNIST/raw."""

    mirrors = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
