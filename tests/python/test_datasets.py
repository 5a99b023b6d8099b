"""Tests of oneflow.utils.vision: MNIST/FashionMNIST/CIFAR10 readers on fake files
written in the real formats, transforms, and the missing-file errors."""
import os
import struct

import numpy as np
import pytest

import oneflow as flow
from oneflow.utils.data import DataLoader
from oneflow.utils.vision import datasets, transforms
from oneflow.utils.vision.fake_data import write_fake_cifar10, write_fake_mnist


def expected_image(pixels, shape):
    """What the readers must return: the written bytes as float32 / 255."""
    return np.frombuffer(pixels, dtype=np.uint8).astype(np.float32).reshape(shape) / np.float32(255)


def check_items(dataset, written, shape):
    assert len(dataset) == len(written)
    for index, (pixels, label) in enumerate(written):
        image, target = dataset[index]
        assert isinstance(image, flow.Tensor)
        assert image.dtype == flow.float32
        assert tuple(image.shape) == shape
        assert type(target) is int and target == label
        np.testing.assert_array_equal(image.numpy(), expected_image(pixels, shape))


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_round_trip(tmp_path, gz):
    written = write_fake_mnist(tmp_path, n_train=30, n_test=12, seed=1, gz=gz)
    train = datasets.MNIST(tmp_path, train=True)
    test = datasets.MNIST(str(tmp_path), train=False)
    check_items(train, written["train"], (1, 28, 28))
    check_items(test, written["test"], (1, 28, 28))
    assert tuple(train.data.shape) == (30, 28, 28) and train.data.dtype == flow.uint8
    assert train.targets.tolist() == [label for _, label in written["train"]]
    assert sorted(set(train.targets.tolist())) == list(range(10))
    assert train.data[0].numpy().tobytes() == written["train"][0][0]


def test_mnist_files_directly_in_root(tmp_path):
    written = write_fake_mnist(tmp_path, n_train=5, n_test=3, seed=2)
    raw = tmp_path / "MNIST" / "raw"
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in os.listdir(raw):
        os.rename(raw / name, flat / name)
    check_items(datasets.MNIST(flat, train=True), written["train"], (1, 28, 28))


def test_fashion_mnist(tmp_path):
    written = write_fake_mnist(tmp_path, n_train=10, n_test=4, seed=3, name="FashionMNIST")
    check_items(datasets.FashionMNIST(tmp_path, train=False), written["test"], (1, 28, 28))
    assert datasets.FashionMNIST.classes[9] == "Ankle boot"


def test_mnist_is_a_dataset_for_the_dataloader(tmp_path):
    written = write_fake_mnist(tmp_path, n_train=10, n_test=2, seed=4)
    loader = DataLoader(datasets.MNIST(tmp_path), batch_size=4)
    X, y = next(iter(loader))
    assert tuple(X.shape) == (4, 1, 28, 28) and X.dtype == flow.float32
    assert y.dtype == flow.int64
    assert y.tolist() == [label for _, label in written["train"][:4]]
    assert len(loader) == 3


def test_mnist_transforms(tmp_path):
    written = write_fake_mnist(tmp_path, n_train=3, n_test=1, seed=5)
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.25,))])
    dataset = datasets.MNIST(tmp_path, transform=pipeline, target_transform=lambda t: t + 100)
    image, target = dataset[1]
    pixels, label = written["train"][1]
    assert target == label + 100
    expected = (expected_image(pixels, (1, 28, 28)) - np.float32(0.5)) / np.float32(0.25)
    np.testing.assert_allclose(image.numpy(), expected, rtol=0, atol=1e-6)


def test_mnist_bad_magic_and_truncation(tmp_path):
    write_fake_mnist(tmp_path, n_train=4, n_test=2, seed=6)
    path = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte"
    data = path.read_bytes()
    path.write_bytes(struct.pack(">I", 0x00000801) + data[4:])
    with pytest.raises(ValueError, match=r"is not an idx3 image file: magic number 0x00000801, expected 0x00000803$"):
        datasets.MNIST(tmp_path)
    path.write_bytes(data[:-1])
    with pytest.raises(ValueError, match=r"has 3151 bytes but its header \(4 images of 28x28\) needs 3152$"):
        datasets.MNIST(tmp_path)


def test_mnist_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        datasets.MNIST(tmp_path, download=True)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"MNIST: missing train-images-idx3-ubyte (or train-images-idx3-ubyte.gz) in {tmp_path} or ")
    assert os.path.join(str(tmp_path), "MNIST", "raw") in message
    assert "t10k-labels-idx1-ubyte" in message
    assert message.endswith("this build never downloads")


def test_cifar10_round_trip(tmp_path):
    written = write_fake_cifar10(tmp_path, n_per_batch=8, seed=7)
    train = datasets.CIFAR10(tmp_path, train=True)
    test = datasets.CIFAR10(tmp_path, train=False)
    assert len(written["train"]) == 40 and len(written["test"]) == 8
    check_items(train, written["train"], (3, 32, 32))
    check_items(test, written["test"], (3, 32, 32))
    assert tuple(train.data.shape) == (40, 3, 32, 32) and train.data.dtype == flow.uint8
    assert train.targets == [label for _, label in written["train"]]
    # Values span the byte range and end up in [0, 1].
    image = train[0][0].numpy()
    assert image.min() >= 0.0 and image.max() <= 1.0


def test_cifar10_files_directly_in_root(tmp_path):
    written = write_fake_cifar10(tmp_path / "staging", n_per_batch=2, seed=8)
    folder = tmp_path / "staging" / "cifar-10-batches-bin"
    check_items(datasets.CIFAR10(folder, train=False), written["test"], (3, 32, 32))


def test_cifar10_with_dataloader_and_normalize(tmp_path):
    write_fake_cifar10(tmp_path, n_per_batch=4, seed=9)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.5)
    plain = datasets.CIFAR10(tmp_path)
    normalized = datasets.CIFAR10(tmp_path, transform=transforms.Normalize(mean, std))
    expected = (plain[3][0].numpy() - np.array(mean, np.float32).reshape(3, 1, 1)) / np.array(
        std, np.float32
    ).reshape(3, 1, 1)
    np.testing.assert_allclose(normalized[3][0].numpy(), expected, rtol=0, atol=1e-6)
    X, y = next(iter(DataLoader(plain, batch_size=6, shuffle=False)))
    assert tuple(X.shape) == (6, 3, 32, 32)
    assert y.tolist() == plain.targets[:6]


def test_cifar10_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        datasets.CIFAR10(tmp_path, train=True, download=True)
    message = str(info.value)
    expected_path = os.path.join(str(tmp_path), "cifar-10-batches-bin", "data_batch_1.bin")
    assert message == (
        f"CIFAR10: missing {expected_path}; put the CIFAR-10 binary version (cifar-10-binary.tar.gz "
        f"from https://www.cs.toronto.edu/~kriz/cifar.html, extracted) under {tmp_path}; "
        "this build never downloads"
    )
    # A partly copied dataset names the first file that is still missing.
    write_fake_cifar10(tmp_path, n_per_batch=1, seed=0)
    os.remove(tmp_path / "cifar-10-batches-bin" / "data_batch_4.bin")
    with pytest.raises(FileNotFoundError, match=r"missing .*data_batch_4\.bin; "):
        datasets.CIFAR10(tmp_path)
    datasets.CIFAR10(tmp_path, train=False)  # the test split is complete


def test_cifar10_rejects_wrong_format(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    (folder / "test_batch.bin").write_bytes(b"\x00" * 3074)
    with pytest.raises(ValueError, match=r"is not a CIFAR-10 binary batch: 3074 bytes is not a positive multiple of the 3073-byte record$"):
        datasets.CIFAR10(tmp_path, train=False)
    (folder / "test_batch.bin").write_bytes(b"\x0c" + b"\x00" * 3072)
    with pytest.raises(ValueError, match=r"record 0 has label 12, expected 0\.\.9$"):
        datasets.CIFAR10(tmp_path, train=False)


def test_to_tensor():
    image = flow.tensor([[[0.5]]], dtype=flow.float32)
    assert transforms.ToTensor()(image) is image
    hwc = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    out = transforms.ToTensor()(hwc)
    assert tuple(out.shape) == (3, 2, 3) and out.dtype == flow.float32
    np.testing.assert_array_equal(out.numpy(), hwc.transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    with pytest.raises(ValueError, match=r"^Normalize: std must be non-zero in every channel, got std=\[1.0, 0.0\]$"):
        transforms.Normalize([0, 0], [1, 0])


def test_fake_data_is_deterministic(tmp_path):
    a = write_fake_cifar10(tmp_path / "a", n_per_batch=3, seed=11)
    b = write_fake_cifar10(tmp_path / "b", n_per_batch=3, seed=11)
    c = write_fake_cifar10(tmp_path / "c", n_per_batch=3, seed=12)
    assert a == b and a != c
    for name in ["data_batch_1.bin", "test_batch.bin"]:
        assert (tmp_path / "a" / "cifar-10-batches-bin" / name).read_bytes() == (
            tmp_path / "b" / "cifar-10-batches-bin" / name
        ).read_bytes()
