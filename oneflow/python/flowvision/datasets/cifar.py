"""CIFAR10 and CIFAR100 in torchvision's layout: the "python version" pickles.

    train = flowvision.datasets.CIFAR10(root="data", train=True, transform=transforms.ToTensor(),
                                        download=True)
    image, label = train[0]       # (3, 32, 32) float32 tensor after ToTensor, int label

CIFAR10 reads ``root/cifar-10-batches-py/data_batch_1`` .. ``data_batch_5`` (train) or
``test_batch`` and ``batches.meta`` (class names); CIFAR100 reads ``root/cifar-100-python/train``
or ``test`` and ``meta``. Each file is a pickled dict whose "data" is a uint8 (N, 3072) array
(the red, green and blue 32x32 planes of each image) and "labels" ("fine_labels" for CIFAR100)
a list of ints. When the folder is missing, the archive as downloaded
(``root/cifar-10-python.tar.gz``, ``root/cifar-100-python.tar.gz``) is read without
extracting it, and CIFAR10 also takes the binary version (``root/cifar-10-batches-bin``) that
oneflow.utils.vision reads.

As in torchvision, ``data`` is a uint8 numpy array (N, 32, 32, 3), ``targets`` a list of ints,
and an item's image is a PIL RGB image (the (32, 32, 3) array when Pillow is not installed).

The pickles are read by a restricted unpickler (oneflow._safe_unpickle): it builds only plain
containers, numbers, strings and numeric numpy arrays, and refuses anything else before it is
built, so a tampered file cannot run code.
"""
import io
import os
import pickle

from flowvision.datasets.vision import VisionDataset, missing_error, to_image
from oneflow._safe_unpickle import BASIC_GLOBALS, RefusedGlobal, RestrictedUnpickler

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


class _ArrayUnpickler(RestrictedUnpickler):
    """Also builds numpy arrays and dtypes (what CIFAR's pickles hold), nothing else."""

    def __init__(self, file, what):
        import numpy as np
        from numpy.core.multiarray import _reconstruct

        allowed = dict(BASIC_GLOBALS)
        for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            allowed[(module, "_reconstruct")] = _reconstruct
        allowed[("numpy", "ndarray")] = np.ndarray
        allowed[("numpy", "dtype")] = np.dtype
        super().__init__(file, allowed, what)
        self._np = np

    def load_build(self):
        state, inst = self.stack[-1], self.stack[-2]
        np = self._np
        if type(inst) is np.ndarray or isinstance(inst, np.dtype):
            if isinstance(inst, np.ndarray) and isinstance(state, tuple) and len(state) >= 3 \
                    and isinstance(state[2], np.dtype) and state[2].hasobject:
                raise RefusedGlobal(f"{self._what}: refused a numpy array of Python objects")
            self.stack.pop()
            inst.__setstate__(state)
            return
        RestrictedUnpickler.load_build(self)

    dispatch = dict(RestrictedUnpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build


def _unpickle(data, name, what):
    try:
        entry = _ArrayUnpickler(io.BytesIO(data), f"{name}: {what}").load()
    except RefusedGlobal:
        raise
    except Exception as e:  # truncated or not a pickle at all
        raise ValueError(f"{name}: {what} is not a CIFAR python-version batch: unreadable pickle "
                         f"({type(e).__name__}: {e})") from None
    if not isinstance(entry, dict):
        raise ValueError(f"{name}: {what} is not a CIFAR python-version batch: it holds a "
                         f"{type(entry).__name__}, expected a dict")
    # Python 3 writers may key the dict with bytes (b"data"); Python 2's pickles read as str.
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


class CIFAR10(VisionDataset):
    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    train_list = [[f"data_batch_{i}", None] for i in range(1, 6)]  # (name, md5): md5s unchecked
    test_list = [["test_batch", None]]
    meta = {"filename": "batches.meta", "key": "label_names"}
    label_key = "labels"
    default_classes = CIFAR10_CLASSES

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False,
                 source_url=None):
        super().__init__(root, transform=transform, target_transform=target_transform)
        import numpy as np

        self.train = train
        self.download = download  # files already there are used either way (no network)
        self.source_url = source_url
        names = [name for name, _ in (self.train_list if train else self.test_list)]
        read = self._reader(names)
        if read is None:
            self.data, self.targets = self._read_binary_version()
        else:
            data, self.targets = [], []
            for name in names:
                entry, what = read(name)
                array, labels = self._check_entry(entry, what)
                data.append(array)
                self.targets.extend(labels)
            self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        self.classes = list(self.default_classes)
        if read is not None:
            meta = read(self.meta["filename"], optional=True)
            if meta is not None and isinstance(meta[0].get(self.meta["key"]), list):
                self.classes = list(meta[0][self.meta["key"]])
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        if hasattr(read, "close"):
            read.close()

    def _reader(self, names):
        """A function name -> (dict, description) over the first place that holds every file:
        the extracted folder, root itself, the archive as downloaded; None for CIFAR10's binary
        version; otherwise the missing-files error."""
        folder = os.path.join(self.root, self.base_folder)
        for place in (folder, self.root):
            if all(os.path.isfile(os.path.join(place, n)) for n in names):
                def read(name, optional=False, place=place):
                    path = os.path.join(place, name)
                    if optional and not os.path.isfile(path):
                        return None
                    with open(path, "rb") as f:
                        return _unpickle(f.read(), type(self).__name__, path), path
                return read
        archive = os.path.join(self.root, self.filename)
        if os.path.isfile(archive):
            return self._archive_reader(archive, names)
        if type(self) is CIFAR10 and os.path.isdir(os.path.join(self.root, "cifar-10-batches-bin")):
            return None
        missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
        raise missing_error(type(self).__name__, missing, folder, also=f"the archive {archive}",
                            source=self.source_url or self.url)

    def _archive_reader(self, archive, names):
        import tarfile

        try:
            tar = tarfile.open(archive, "r:*")
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ValueError(f"{type(self).__name__}: {archive} is not a readable tar archive: {e}") from None

        def read(name, optional=False):
            member = members.get(f"{self.base_folder}/{name}")
            what = f"{archive}:{self.base_folder}/{name}"
            if member is None:
                if optional:
                    return None
                raise FileNotFoundError(f"{type(self).__name__}: {archive} has no {self.base_folder}/{name}; "
                                        f"it is not the {self.filename} archive")
            try:
                data = tar.extractfile(member).read()
            except (tarfile.TarError, OSError, EOFError) as e:  # a truncated download
                raise ValueError(f"{type(self).__name__}: {archive} is not a readable tar archive: {e}") from None
            return _unpickle(data, type(self).__name__, what), what

        read.close = tar.close
        return read

    def _check_entry(self, entry, what):
        import numpy as np

        array = entry.get("data")
        labels = entry.get(self.label_key, entry.get("labels"))
        if not isinstance(array, np.ndarray) or labels is None:
            raise ValueError(f"{type(self).__name__}: {what} is not a CIFAR python-version batch: "
                             f"expected the keys 'data' and '{self.label_key}', got {sorted(map(str, entry))}")
        if array.dtype != np.uint8 or array.ndim != 2 or array.shape[1] != 3072:
            raise ValueError(f"{type(self).__name__}: {what} is not a CIFAR python-version batch: data is "
                             f"{array.dtype} {array.shape}, expected uint8 (N, 3072)")
        labels = [int(v) for v in labels]
        if len(labels) != len(array):
            raise ValueError(f"{type(self).__name__}: {what} holds {len(array)} images but {len(labels)} labels")
        return array, labels

    def _read_binary_version(self):
        # oneflow.utils.vision reads the binary version into (N, 3, 32, 32); torchvision's
        # layout is (N, 32, 32, 3).
        from oneflow.utils.vision.datasets import CIFAR10 as BinaryCIFAR10

        binary = BinaryCIFAR10(self.root, train=self.train)
        return binary.data.numpy().transpose(0, 2, 3, 1), list(binary.targets)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.data[index], self.targets[index]
        return self._apply(to_image(img), target)

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"


class CIFAR100(CIFAR10):
    """100 classes of 600 images: ``root/cifar-100-python/train`` and ``test`` (targets are
    the fine labels), or the archive ``cifar-100-python.tar.gz``."""

    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    train_list = [["train", None]]
    test_list = [["test", None]]
    meta = {"filename": "meta", "key": "fine_label_names"}
    label_key = "fine_labels"
    default_classes = [str(i) for i in range(100)]
