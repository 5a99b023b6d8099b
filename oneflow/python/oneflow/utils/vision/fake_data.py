"""Writers of tiny MNIST and CIFAR-10 files in the real on-disk formats, for
tests and examples (nothing is downloaded in this build).

The images are learnable: each class has its own pattern (a bright square for
MNIST, a colour and a bright horizontal band for CIFAR-10) under uniform
noise, so a small network reaches high accuracy within an epoch. Only
Python's ``random`` module is used, so the same seed writes the same bytes
everywhere.

    samples = write_fake_cifar10("/tmp/cifar", n_per_batch=100, seed=0)
    samples["train"][0]  # (3072 pixel bytes, label) of the first record written
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


def write_fake_cifar10(root, n_per_batch=100, seed=0):
    """Writes the CIFAR-10 binary version under ``root/cifar-10-batches-bin``:
    ``data_batch_1.bin`` .. ``data_batch_5.bin`` and ``test_batch.bin`` with
    ``n_per_batch`` records each (1 label byte + 3072 pixel bytes).

    Returns ``{"train": [(3072 pixel bytes, label), ...], "test": [...]}`` in
    file order (train: batch 1 first).
    """
    rng = random.Random(seed)
    folder = os.path.join(os.fspath(root), "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    templates = [_cifar_template(label) for label in range(10)]
    written = {"train": [], "test": []}
    files = [(f"data_batch_{i}.bin", "train") for i in range(1, 6)] + [("test_batch.bin", "test")]
    for filename, split in files:
        labels = _balanced_labels(n_per_batch, rng)
        records = []
        for label in labels:
            pixels = _noisy(templates[label], rng)
            records.append(bytes([label]) + pixels)
            written[split].append((pixels, label))
        with open(os.path.join(folder, filename), "wb") as f:
            f.write(b"".join(records))
    with open(os.path.join(folder, "batches.meta.txt"), "w") as f:
        f.write("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n")
    return written
