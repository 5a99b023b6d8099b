"""flowvision: datasets read in torchvision's on-disk layouts (checked against the bytes written
and against Debian's torchvision reading the same files), transforms against torchvision's, and
models whose state_dicts and outputs match torchvision's."""
import os
import pickle

import numpy as np
import pytest

import oneflow as flow
import flowvision
import flowvision.transforms as transforms
from flowvision.transforms import functional as F
from oneflow.utils.vision.fake_data import write_fake_cifar10, write_fake_cifar100, write_fake_mnist

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402  (python3-pil comes with python3-torchvision)


def trust_files(monkeypatch):
    """torchvision checks md5 sums of the published files; ours are fake, so skip that check
    (its readers are the reference here, not its checksums)."""
    import torchvision.datasets.cifar as tv_cifar

    monkeypatch.setattr(tv_cifar, "check_integrity", lambda *a, **k: True)


def image_array(pixels, shape):
    return np.frombuffer(pixels, dtype=np.uint8).reshape(shape)


# ------------------------------------------------------------------------------------ MNIST
@pytest.mark.parametrize("gz", [False, True])
def test_mnist_idx_files_read_as_written_and_as_torchvision_reads_them(tmp_path, gz):
    written = write_fake_mnist(tmp_path, n_train=12, n_test=5, seed=1, gz=gz)
    train = flowvision.datasets.MNIST(tmp_path, train=True)
    test = flowvision.datasets.MNIST(str(tmp_path), train=False, download=True)
    for ds, split in ((train, "train"), (test, "test")):
        assert len(ds) == len(written[split])
        for i, (pixels, label) in enumerate(written[split]):
            img, target = ds[i]
            assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (28, 28)
            assert type(target) is int and target == label
            np.testing.assert_array_equal(np.asarray(img), image_array(pixels, (28, 28)))
    assert train.data.dtype == flow.uint8 and tuple(train.data.shape) == (12, 28, 28)
    assert train.targets.dtype == flow.int64
    assert train.targets.tolist() == [label for _, label in written["train"]]
    if not gz:  # torchvision reads only the extracted files
        ref = torchvision.datasets.MNIST(tmp_path, train=True)
        np.testing.assert_array_equal(train.data.numpy(), ref.data.numpy())
        assert train.targets.tolist() == ref.targets.tolist()
        np.testing.assert_array_equal(np.asarray(train[3][0]), np.asarray(ref[3][0]))


def test_fashion_mnist_and_to_tensor_pipeline(tmp_path):
    written = write_fake_mnist(tmp_path, n_train=6, n_test=2, seed=2, name="FashionMNIST")
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    ds = flowvision.datasets.FashionMNIST(tmp_path, transform=pipeline, target_transform=lambda t: t + 1)
    x, y = ds[4]
    pixels, label = written["train"][4]
    assert y == label + 1 and tuple(x.shape) == (1, 28, 28) and x.dtype == flow.float32
    expected = (image_array(pixels, (1, 28, 28)).astype(np.float32) / np.float32(255) - 0.5) / 0.5
    np.testing.assert_allclose(x.numpy(), expected, rtol=0, atol=1e-6)
    assert ds.classes[9] == "Ankle boot" and ds.class_to_idx["Bag"] == 8
    assert repr(ds).splitlines()[0] == "Dataset FashionMNIST"


def test_mnist_missing_files_is_one_line_naming_files_and_folder(tmp_path):
    for download in (False, True):
        with pytest.raises(FileNotFoundError) as info:
            flowvision.datasets.MNIST(tmp_path, train=False, download=download)
        raw = os.path.join(str(tmp_path), "MNIST", "raw")
        assert str(info.value) == (
            f"MNIST: cannot find t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] in {raw} "
            f"(nor {tmp_path}); put the files there (from http://yann.lecun.com/exdb/mnist/; there is "
            "no network, so download=True only uses files already there)")


def test_mnist_truncated_file_is_named(tmp_path):
    write_fake_mnist(tmp_path, n_train=3, n_test=1, seed=3)
    path = tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ValueError, match=r"^MNIST: .*train-labels-idx1-ubyte has 10 bytes but its header \(3 labels\) needs 11$"):
        flowvision.datasets.MNIST(tmp_path)


# ------------------------------------------------------------------------------------ CIFAR
@pytest.mark.parametrize("layout", ["python", "archive", "binary"])
def test_cifar10_layouts_read_as_written(tmp_path, layout):
    written = write_fake_cifar10(tmp_path, n_per_batch=6, seed=4, layout=layout)
    if layout == "archive":
        assert sorted(os.listdir(tmp_path)) == ["cifar-10-python.tar.gz"]  # read without extracting
    train = flowvision.datasets.CIFAR10(tmp_path, train=True, download=True)
    test = flowvision.datasets.CIFAR10(tmp_path, train=False)
    assert train.data.shape == (30, 32, 32, 3) and train.data.dtype == np.uint8
    for ds, split in ((train, "train"), (test, "test")):
        assert ds.targets == [label for _, label in written[split]]
        for i, (pixels, label) in enumerate(written[split]):
            # The files hold the R, G, B planes of each image; torchvision's layout is HWC.
            hwc = image_array(pixels, (3, 32, 32)).transpose(1, 2, 0)
            np.testing.assert_array_equal(ds.data[i], hwc)
            img, target = ds[i]
            assert isinstance(img, Image.Image) and img.mode == "RGB" and target == label
            np.testing.assert_array_equal(np.asarray(img), hwc)
    assert train.classes[0] == "airplane" and train.class_to_idx["truck"] == 9


def test_cifar10_python_version_equals_torchvision(tmp_path, monkeypatch):
    trust_files(monkeypatch)
    write_fake_cifar10(tmp_path, n_per_batch=5, seed=5, layout="python")
    ours = flowvision.datasets.CIFAR10(tmp_path, train=True, transform=transforms.ToTensor())
    ref = torchvision.datasets.CIFAR10(tmp_path, train=True, transform=torchvision.transforms.ToTensor())
    np.testing.assert_array_equal(ours.data, ref.data)
    assert ours.targets == ref.targets and ours.classes == ref.classes
    for i in (0, 7, 24):
        np.testing.assert_array_equal(ours[i][0].numpy(), ref[i][0].numpy())
        assert ours[i][1] == ref[i][1]


def test_cifar100_python_and_archive(tmp_path, monkeypatch):
    trust_files(monkeypatch)
    written = write_fake_cifar100(tmp_path / "py", n_train=12, n_test=4, seed=6)
    write_fake_cifar100(tmp_path / "ar", n_train=12, n_test=4, seed=6, layout="archive")
    for root in ("py", "ar"):
        ds = flowvision.datasets.CIFAR100(tmp_path / root, train=True)
        assert ds.targets == [label for _, label in written["train"]]
        np.testing.assert_array_equal(ds.data[11], image_array(written["train"][11][0], (3, 32, 32)).transpose(1, 2, 0))
        assert ds.classes[:2] == ["fine0", "fine1"] and len(ds.classes) == 100
    ref = torchvision.datasets.CIFAR100(tmp_path / "py", train=False)
    ours = flowvision.datasets.CIFAR100(tmp_path / "py", train=False)
    np.testing.assert_array_equal(ours.data, ref.data)
    assert ours.targets == ref.targets


def test_cifar_missing_files_is_one_line(tmp_path):
    for download in (False, True):
        with pytest.raises(FileNotFoundError) as info:
            flowvision.datasets.CIFAR10(tmp_path, train=True, download=download)
        folder = os.path.join(str(tmp_path), "cifar-10-batches-py")
        assert str(info.value) == (
            f"CIFAR10: cannot find data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5 in "
            f"{folder} (nor the archive {tmp_path}/cifar-10-python.tar.gz); put the files there (from "
            "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz; there is no network, so "
            "download=True only uses files already there)")
    # A partly copied folder names only what is missing; the URL a user passed is the one named.
    write_fake_cifar10(tmp_path, n_per_batch=2, seed=0, layout="python")
    os.remove(tmp_path / "cifar-10-batches-py" / "data_batch_3")
    with pytest.raises(FileNotFoundError, match=r"^CIFAR10: cannot find data_batch_3 in .*\(from https://mirror/c.tgz; "):
        flowvision.datasets.CIFAR10(tmp_path, download=True, source_url="https://mirror/c.tgz")
    flowvision.datasets.CIFAR10(tmp_path, train=False)  # the test split is complete


def test_cifar_pickles_cannot_run_code_and_bad_batches_are_named(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    (folder / "test_batch").write_bytes(pickle.dumps({"data": Evil(), "labels": [0]}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"^CIFAR10: .*test_batch: refused to load global '(posix|os)\.system'"):
        flowvision.datasets.CIFAR10(tmp_path, train=False)
    assert not (tmp_path / "pwned").exists()
    (folder / "test_batch").write_bytes(pickle.dumps({"data": np.zeros((2, 100), np.uint8), "labels": [0, 1]}))
    with pytest.raises(ValueError, match=r"^CIFAR10: .*test_batch is not a CIFAR python-version batch: data is uint8 \(2, 100\), expected uint8 \(N, 3072\)$"):
        flowvision.datasets.CIFAR10(tmp_path, train=False)
    (folder / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match=r"^CIFAR10: .*test_batch is not a CIFAR python-version batch: unreadable pickle \("):
        flowvision.datasets.CIFAR10(tmp_path, train=False)


def test_mnist_gz_files_as_downloaded(tmp_path):
    """The four .gz files exactly as downloaded from the mirror, left in raw/ unextracted."""
    written = write_fake_mnist(tmp_path, n_train=4, n_test=2, seed=7, gz=True)
    assert sorted(os.listdir(tmp_path / "MNIST" / "raw"))[0].endswith(".gz")
    ds = flowvision.datasets.MNIST(tmp_path, train=True, download=True)
    np.testing.assert_array_equal(np.asarray(ds[2][0]), image_array(written["train"][2][0], (28, 28)))


# ------------------------------------------------------------------------------- transforms
def pil_rgb(seed=0, size=(37, 29)):
    rng = np.random.RandomState(seed)
    return Image.fromarray(rng.randint(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def test_transforms_on_pil_images_match_torchvision():
    T = torchvision.transforms
    img = pil_rgb()
    cases = [
        (transforms.Resize(20), T.Resize(20)),
        (transforms.Resize((15, 40)), T.Resize((15, 40))),
        (transforms.Resize(24, interpolation=transforms.InterpolationMode.NEAREST),
         T.Resize(24, interpolation=T.InterpolationMode.NEAREST)),
        (transforms.CenterCrop(16), T.CenterCrop(16)),
        (transforms.CenterCrop((40, 50)), T.CenterCrop((40, 50))),  # larger than the image: padded
        (transforms.Pad(3), T.Pad(3)),
        (transforms.Pad((1, 2, 3, 4), fill=(9, 8, 7)), T.Pad((1, 2, 3, 4), fill=(9, 8, 7))),
        (transforms.Pad(2, padding_mode="reflect"), T.Pad(2, padding_mode="reflect")),
        (transforms.Pad((2, 1), padding_mode="edge"), T.Pad((2, 1), padding_mode="edge")),
        (transforms.Pad(2, padding_mode="symmetric"), T.Pad(2, padding_mode="symmetric")),
        (transforms.RandomHorizontalFlip(p=1.0), T.RandomHorizontalFlip(p=1.0)),
        (transforms.RandomVerticalFlip(p=1.0), T.RandomVerticalFlip(p=1.0)),
    ]
    for ours, ref in cases:
        a, b = ours(img), ref(img)
        assert isinstance(a, Image.Image) and a.mode == b.mode, ours
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=repr(ours))
    pipeline = transforms.Compose([transforms.Resize(32), transforms.CenterCrop(28), transforms.ToTensor(),
                                   transforms.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.4))])
    ref = T.Compose([T.Resize(32), T.CenterCrop(28), T.ToTensor(), T.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.4))])
    np.testing.assert_allclose(pipeline(img).numpy(), ref(img).numpy(), rtol=0, atol=1e-6)
    grey = Image.fromarray(np.arange(35, dtype=np.uint8).reshape(5, 7), mode="L")
    np.testing.assert_array_equal(transforms.ToTensor()(grey).numpy(), T.ToTensor()(grey).numpy())


def test_transforms_on_tensors_match_torchvision():
    T = torchvision.transforms
    x = np.random.RandomState(1).rand(2, 3, 13, 17).astype(np.float32)
    ours_in, ref_in = flow.tensor(x), torch.tensor(x)
    cases = [
        (transforms.Resize((7, 30)), T.Resize((7, 30))),
        (transforms.Resize(9, interpolation=transforms.InterpolationMode.NEAREST),
         T.Resize(9, interpolation=T.InterpolationMode.NEAREST)),
        (transforms.CenterCrop((8, 9)), T.CenterCrop((8, 9))),
        (transforms.Pad((1, 2), padding_mode="reflect"), T.Pad((1, 2), padding_mode="reflect")),
        (transforms.RandomHorizontalFlip(p=1.0), T.RandomHorizontalFlip(p=1.0)),
        (transforms.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7)), T.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))),
    ]
    for ours, ref in cases:
        a, b = ours(ours_in), ref(ref_in)
        assert isinstance(a, flow.Tensor) and tuple(a.shape) == tuple(b.shape), ours
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=repr(ours))


def test_random_crop_with_padding_repeats_under_manual_seed():
    img = pil_rgb(2, (32, 32))
    crop = transforms.RandomCrop(32, padding=4)
    flow.manual_seed(3)
    first = [np.asarray(crop(img)) for _ in range(6)]
    flow.manual_seed(3)
    again = [np.asarray(crop(img)) for _ in range(6)]
    assert all((a == b).all() for a, b in zip(first, again))
    assert all(a.shape == (32, 32, 3) for a in first)
    # Each crop is a 32x32 window of the zero-padded 40x40 image.
    padded = np.pad(np.asarray(img), ((4, 4), (4, 4), (0, 0)))
    windows = {(i, j) for i in range(9) for j in range(9)
               for a in first[:1] if (padded[i:i + 32, j:j + 32] == a).all()}
    assert windows, "the crop is not a window of the padded image"
    assert len({a.tobytes() for a in first}) > 1
    flips = transforms.RandomHorizontalFlip()
    flow.manual_seed(0)
    flipped = sum((np.asarray(flips(img)) != np.asarray(img)).any() for _ in range(40))
    assert 8 < flipped < 32


def test_transforms_without_pillow_take_numpy_arrays():
    hwc = np.random.RandomState(4).randint(0, 256, (10, 12, 3), dtype=np.uint8)
    np.testing.assert_array_equal(F.hflip(hwc), hwc[:, ::-1])
    np.testing.assert_array_equal(transforms.CenterCrop(4)(hwc), hwc[3:7, 4:8])
    np.testing.assert_array_equal(transforms.Pad(1)(hwc)[1:-1, 1:-1], hwc)
    t = transforms.ToTensor()(hwc)
    np.testing.assert_array_equal(t.numpy(), hwc.transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    assert transforms.Lambda(lambda a: a.shape)(hwc) == (10, 12, 3)


def test_transform_errors_are_one_line():
    with pytest.raises(TypeError, match=r"^to_tensor: expected a PIL image, a numpy array or a oneflow tensor, got list$"):
        transforms.ToTensor()([1, 2])
    with pytest.raises(ValueError, match=r"^RandomCrop: crop size \(40, 40\) is larger than the image size \(29, 37\)$"):
        transforms.RandomCrop(40)(pil_rgb())
    with pytest.raises(ValueError, match=r"^pad: padding must be an int or a sequence of 1, 2 or 4 ints, got \(1, 2, 3\)$"):
        transforms.Pad((1, 2, 3))
    with pytest.raises(ValueError, match=r"^Normalize: mean has 2 values but the image has 3 channels$"):
        transforms.Normalize((0.5, 0.5), (1, 1))(flow.zeros(3, 4, 4))


# ----------------------------------------------------------------------------------- models
def assert_same_architecture(ours, ref):
    sd_o, sd_r = ours.state_dict(), ref.state_dict()
    assert list(sd_o) == list(sd_r)
    for k in sd_o:
        assert tuple(sd_o[k].shape) == tuple(sd_r[k].shape), k


@pytest.mark.parametrize("name,kwargs,size", [
    ("resnet18", {}, 64),
    ("resnet50", {"num_classes": 10}, 64),
    ("mobilenet_v2", {"num_classes": 10}, 32),
])
def test_models_match_torchvision(name, kwargs, size):
    """The same state_dict keys and shapes; with torchvision's weights copied in, the same
    outputs (eval mode)."""
    flow.manual_seed(0)
    torch.manual_seed(0)
    ours = getattr(flowvision.models, name)(**kwargs)
    ref = getattr(torchvision.models, name)(**kwargs)
    assert_same_architecture(ours, ref)
    ours.load_state_dict({k: flow.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    ours.eval()
    ref.eval()
    x = np.random.RandomState(0).randn(2, 3, size, size).astype(np.float32)
    a = ours(flow.tensor(x)).detach().numpy()
    with torch.no_grad():
        b = ref(torch.tensor(x)).numpy()
    assert a.shape == b.shape == (2, kwargs.get("num_classes", 1000))
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


def test_mobilenet_v2_attributes_as_the_tutorial_uses_them():
    model = flowvision.models.mobilenet_v2()
    assert model.last_channel == 1280
    assert isinstance(model.classifier[1], flow.nn.Linear) and model.classifier[1].out_features == 1000
    assert model.classifier[0].p == 0.2
    model.classifier = flow.nn.Sequential(flow.nn.Dropout(0.2), flow.nn.Linear(model.last_channel, 10))
    assert tuple(model(flow.randn(2, 3, 32, 32)).shape) == (2, 10)
    assert flowvision.models.mobilenet_v2(width_mult=0.5).features[0][0].out_channels == 16
    # torchvision's initialisation of the head: N(0, 0.01) weights.
    w = flowvision.models.mobilenet_v2().classifier[1].weight.detach().numpy()
    assert abs(float(w.std()) - 0.01) < 1e-3 and abs(float(w.mean())) < 1e-3


def test_vgg11_and_lenet(monkeypatch):
    # VGG-11 has 133M parameters: building it would spend seconds drawing random numbers, so both
    # frameworks build it with initialisation switched off; the architecture is what is compared.
    for module in (flow.nn.init, torch.nn.init):
        for fn in ("normal_", "kaiming_normal_", "kaiming_uniform_", "uniform_", "constant_"):
            monkeypatch.setattr(module, fn, lambda t, *a, **k: t)
    assert_same_architecture(flowvision.models.vgg11(num_classes=10), torchvision.models.vgg11(num_classes=10))
    assert_same_architecture(flowvision.models.vgg11_bn(), torchvision.models.vgg11_bn())
    monkeypatch.undo()
    lenet = flowvision.models.lenet(num_classes=7)
    assert tuple(lenet(flow.randn(3, 3, 32, 32)).shape) == (3, 7)
    mnist = flowvision.models.lenet(num_classes=10, in_channels=1, image_size=28)
    assert tuple(mnist(flow.randn(2, 1, 28, 28)).shape) == (2, 10)
    assert sum(p.numel() for p in lenet.parameters()) == 62006 - 3 * 84 - 3  # PyTorch tutorial's Net, 7 classes


def test_pretrained_weights_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^resnet18: pretrained=True needs the published weights, which this build cannot download \(no network\); "):
        flowvision.models.resnet18(pretrained=True)
    with pytest.raises(ValueError, match=r"^mobilenet_v2: weights='DEFAULT' needs the published weights"):
        flowvision.models.mobilenet_v2(weights="DEFAULT")


def test_without_pillow_items_are_arrays_and_the_pipeline_still_works(tmp_path, monkeypatch):
    write_fake_cifar10(tmp_path, n_per_batch=3, seed=8, layout="python")
    pipeline = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
                                   transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.2,) * 3)])
    with_pil = flowvision.datasets.CIFAR10(tmp_path, transform=pipeline)
    flow.manual_seed(5)
    expected = [with_pil[i][0].numpy() for i in range(6)]
    import flowvision.datasets.vision as vision
    import oneflow.utils.vision.transforms.functional as functional

    monkeypatch.setattr(vision, "_pil_image", lambda: None)
    monkeypatch.setattr(functional, "_pil", lambda: None)
    plain = flowvision.datasets.CIFAR10(tmp_path)
    img, _ = plain[0]
    assert isinstance(img, np.ndarray) and img.shape == (32, 32, 3) and img.dtype == np.uint8
    with_arrays = flowvision.datasets.CIFAR10(tmp_path, transform=pipeline)
    flow.manual_seed(5)  # the same crops and flips: the same tensors as through PIL
    for i in range(6):
        np.testing.assert_array_equal(with_arrays[i][0].numpy(), expected[i])
    mnist_root = tmp_path / "m"
    write_fake_mnist(mnist_root, n_train=2, n_test=1, seed=9)
    item = flowvision.datasets.MNIST(mnist_root)[1][0]
    assert isinstance(item, np.ndarray) and item.shape == (28, 28)
