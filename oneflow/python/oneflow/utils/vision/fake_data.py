"""Writers of tiny MNIST, CIFAR-10 and CIFAR-100 files in the real on-disk formats (idx files,
CIFAR's binary and python versions, the .tar.gz archives), for tests and examples (nothing is
downloaded in this build).

The images are learnable: each class has its own pattern (a bright square for
MNIST, a colour and a bright horizontal band for CIFAR-10) under uniform
noise, so a small network reaches high accuracy within an epoch. The pixels
come from Python's ``random`` module, so the same seed writes the same images
everywhere (the python layout's pickles are written with numpy).

    samples = write_fake_cifar10("/tmp/cifar", n_per_batch=100, seed=0)
    samples["train"][0]  # (3072 pixel bytes, label) of the first record written
    write_fake_cifar10("/tmp/cifar", n_per_batch=100, seed=0, layout="python")  # torchvision's
"""
import os
import random
import struct

_NOISE = 32  # pixels get template + uniform noise in [-32, 31]


def _noisy(template, rng):
    """template (list of ints 0..255) plus noise, clamped to bytes."""
    noise = rng.randbytes(len(template))
    out = bytearray(len(template))
    for i, (t, n) in enumerate(zip(template, noise)):
        v = t + (n >> 2) - _NOISE  # n >> 2 is uniform in 0..63
        out[i] = 0 if v < 0 else (255 if v > 255 else v)
    return bytes(out)


def _balanced_labels(n, rng):
    # Every class equally often (up to one), in random order.
    labels = [i % 10 for i in range(n)]
    rng.shuffle(labels)
    return labels


def _mnist_template(label, rows=28, cols=28):
    """Dark background with a bright 6x6 square whose place depends on the label."""
    top = 4 + (label // 5) * 12
    left = 1 + (label % 5) * 5
    template = [40] * (rows * cols)
    for y in range(top, top + 6):
        for x in range(left, left + 6):
            template[y * cols + x] = 220
    return template


def _cifar_template(label):
    """Three 32x32 planes (R, G, B): a class colour plus a bright band at rows 3*label+1 .. 3*label+3."""
    colour = (40 + (label * 67) % 160, 40 + (label * 113) % 160, 40 + (label * 29) % 160)
    template = []
    for channel in range(3):
        for y in range(32):
            value = 240 if 3 * label + 1 <= y <= 3 * label + 3 else colour[channel]
            template.extend([value] * 32)
    return template


def _write(path, data, gz):
    if gz:
        import gzip

        with gzip.open(path + ".gz", "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def write_fake_mnist(root, n_train=100, n_test=50, seed=0, name="MNIST", gz=False):
    """Writes MNIST-format idx files (28x28) under ``root/<name>/raw``
    (``name="FashionMNIST"`` for FashionMNIST's folder), gzipped when ``gz``.

    Returns ``{"train": [(784 pixel bytes, label), ...], "test": [...]}`` in file order.
    """
    rng = random.Random(seed)
    folder = os.path.join(os.fspath(root), name, "raw")
    os.makedirs(folder, exist_ok=True)
    templates = [_mnist_template(label) for label in range(10)]
    written = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        labels = _balanced_labels(n, rng)
        images = [_noisy(templates[label], rng) for label in labels]
        _write(
            os.path.join(folder, f"{prefix}-images-idx3-ubyte"),
            struct.pack(">IIII", 0x00000803, n, 28, 28) + b"".join(images),
            gz,
        )
        _write(
            os.path.join(folder, f"{prefix}-labels-idx1-ubyte"),
            struct.pack(">II", 0x00000801, n) + bytes(labels),
            gz,
        )
        written[split] = list(zip(images, labels))
    return written


def write_fake_cifar10(root, n_per_batch=100, seed=0, layout="binary"):
    """Writes CIFAR-10 files with ``n_per_batch`` images in each of the five training batches
    and the test batch, in one of the layouts people have on disk:

    * ``"binary"``: ``root/cifar-10-batches-bin/data_batch_1.bin`` .. ``data_batch_5.bin``,
      ``test_batch.bin``, records of 1 label byte + 3072 pixel bytes (oneflow.utils.vision);
    * ``"python"``: ``root/cifar-10-batches-py/data_batch_1`` .. ``test_batch``,
      ``batches.meta``: pickled dicts, "data" a uint8 (N, 3072) numpy array and "labels" a list
      (torchvision's and flowvision's CIFAR10);
    * ``"archive"``: the python layout packed as ``root/cifar-10-python.tar.gz``, as downloaded.

    The same seed writes the same images in every layout.

    Returns ``{"train": [(3072 pixel bytes, label), ...], "test": [...]}`` in
    file order (train: batch 1 first).
    """
    if layout not in ("binary", "python", "archive"):
        raise ValueError(f"write_fake_cifar10: layout must be binary, python or archive, got {layout!r}")
    rng = random.Random(seed)
    templates = [_cifar_template(label) for label in range(10)]
    written = {"train": [], "test": []}
    batches = []  # (name, [(pixels, label), ...])
    for i, split in [(i, "train") for i in range(1, 6)] + [(0, "test")]:
        labels = _balanced_labels(n_per_batch, rng)
        records = [(_noisy(templates[label], rng), label) for label in labels]
        written[split].extend(records)
        batches.append((f"data_batch_{i}" if i else "test_batch", records))
    if layout == "binary":
        folder = os.path.join(os.fspath(root), "cifar-10-batches-bin")
        os.makedirs(folder, exist_ok=True)
        for name, records in batches:
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(b"".join(bytes([label]) + pixels for pixels, label in records))
        with open(os.path.join(folder, "batches.meta.txt"), "w") as f:
            f.write("\n".join(CIFAR10_CLASSES) + "\n\n")
        return written
    files = {name: _cifar_pickle(name, records) for name, records in batches}
    files["batches.meta"] = _pickle2({"num_cases_per_batch": n_per_batch, "label_names": CIFAR10_CLASSES,
                                      "num_vis": 3072})
    _write_python_layout(root, "cifar-10-batches-py", "cifar-10-python.tar.gz", files, layout)
    return written


def write_fake_cifar100(root, n_train=100, n_test=20, seed=0, layout="python"):
    """Writes CIFAR-100's python version: ``root/cifar-100-python/train``, ``test`` and ``meta``
    (or, with ``layout="archive"``, ``root/cifar-100-python.tar.gz``). Image i of a split has
    fine label i % 100 and the pattern of class i % 10.

    Returns ``{"train": [(3072 pixel bytes, fine label), ...], "test": [...]}``.
    """
    rng = random.Random(seed)
    templates = [_cifar_template(label) for label in range(10)]
    written, files = {}, {}
    for split, n in (("train", n_train), ("test", n_test)):
        records = [(_noisy(templates[i % 10], rng), i % 100) for i in range(n)]
        written[split] = records
        files[split] = _cifar_pickle(split, records, label_key="fine_labels",
                                     extra={"coarse_labels": [label // 5 for _, label in records]})
    files["meta"] = _pickle2({"fine_label_names": [f"fine{i}" for i in range(100)],
                              "coarse_label_names": [f"coarse{i}" for i in range(20)]})
    _write_python_layout(root, "cifar-100-python", "cifar-100-python.tar.gz", files, layout)
    return written


CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _pickle2(obj):
    import pickle

    # Protocol 2, as the published files (written by Python 2) use.
    return pickle.dumps(obj, protocol=2)


def _cifar_pickle(name, records, label_key="labels", extra=None):
    import numpy as np

    data = np.frombuffer(b"".join(pixels for pixels, _ in records), dtype=np.uint8).reshape(-1, 3072)
    entry = {"batch_label": f"fake {name}", label_key: [label for _, label in records], "data": data,
             "filenames": [f"fake_{i:05d}.png" for i in range(len(records))]}
    entry.update(extra or {})
    return _pickle2(entry)


def _write_python_layout(root, folder_name, archive_name, files, layout):
    root = os.fspath(root)
    os.makedirs(root, exist_ok=True)
    if layout == "python":
        folder = os.path.join(root, folder_name)
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        return
    import io
    import tarfile

    with tarfile.open(os.path.join(root, archive_name), "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{folder_name}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
