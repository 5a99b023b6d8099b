"""oneflow.mock_torch: import torch / torchvision / safetensors give oneflow's, names oneflow lacks
fail naming the PyTorch name, disable() brings the real packages back, and the shell line of
`python3 -m oneflow.mock_torch` turns it on for whole commands."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oneflow as flow
import oneflow.mock_torch as mock
from test_comm import env_with


@pytest.fixture
def mocked():
    with mock.enable():
        yield
    assert not mock.is_enabled()


def test_torch_names_are_oneflow(mocked, tmp_path):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim
    import torchvision
    import torchvision.transforms as transforms
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler
    import flowvision
    import oneflow.utils.data as ofdata

    assert torch.Tensor is flow.Tensor and nn.Linear is flow.nn.Linear and F.relu is flow.nn.functional.relu
    assert optim.SGD is flow.optim.SGD and DataLoader is ofdata.DataLoader and TensorDataset is ofdata.TensorDataset
    assert DistributedSampler is ofdata.DistributedSampler
    assert DistributedDataParallel is flow.nn.parallel.DistributedDataParallel
    assert dist.init_process_group is flow.distributed.init_process_group and dist.ReduceOp.SUM == "sum"
    assert torchvision.models.resnet18 is flowvision.models.resnet18
    assert transforms.Normalize is flowvision.transforms.Normalize
    assert torch.load is flow.load and torch.save is flow.save
    # torch.distributed reached as an attribute, as scripts that only `import torch` do.
    assert torch.distributed.all_reduce is flow.distributed.all_reduce
    assert torch.utils.data.DataLoader is DataLoader
    x = torch.zeros(2, 3)
    assert isinstance(x, flow.Tensor) and tuple(x.shape) == (2, 3)
    torch.save({"w": torch.ones(2)}, str(tmp_path / "m.pt"))
    assert torch.load(str(tmp_path / "m.pt"))["w"].tolist() == [1.0, 1.0]


def test_safetensors_torch_is_ours(mocked, tmp_path):
    from safetensors.torch import load_file, save_file
    import safetensors

    from oneflow.utils import safetensors as ours

    assert save_file is ours.save_file and load_file is ours.load_file and safetensors.safe_open is ours.safe_open
    save_file({"a": flow.arange(6, dtype=flow.float32).reshape(2, 3)}, str(tmp_path / "a.safetensors"))
    np.testing.assert_array_equal(load_file(str(tmp_path / "a.safetensors"))["a"].numpy(),
                                  np.arange(6, dtype=np.float32).reshape(2, 3))


def test_setting_an_attribute_sets_ours(mocked):
    import torch.backends.cudnn as cudnn

    before = flow.backends.cudnn.enabled
    cudnn.enabled = not before
    try:
        assert flow.backends.cudnn.enabled is (not before)
    finally:
        cudnn.enabled = before
    import torch

    assert "nn" not in vars(flow) or vars(flow)["nn"] is flow.nn  # binding torch.nn left oneflow.nn alone
    assert torch.nn is not flow.nn and torch.nn.Module is flow.nn.Module


def test_missing_names_fail_naming_the_pytorch_name(mocked):
    import torch

    with pytest.raises(AttributeError, match=r"^mock_torch: torch\.fft is not implemented by oneflow \(no oneflow\.fft\)$"):
        torch.fft
    assert not hasattr(torch, "compile")
    with pytest.raises(AttributeError, match=r"^mock_torch: torch\.nn\.Transformer is not implemented by oneflow \(no oneflow\.nn\.Transformer\)$"):
        torch.nn.Transformer
    with pytest.raises(ModuleNotFoundError, match=r"^mock_torch: torch\.multiprocessing is not implemented by oneflow \(no module oneflow\.multiprocessing\)$"):
        import torch.multiprocessing  # noqa: F401
    with pytest.raises(ImportError, match=r"^mock_torch: torch\.cuda\.nvtx is not implemented by oneflow"):
        from torch.cuda.nvtx import range_push  # noqa: F401
    with pytest.raises(ImportError, match=r"cannot import name 'ResNet18_Weights' from 'torchvision\.models'"):
        from torchvision.models import ResNet18_Weights  # noqa: F401


def test_lazy_mode_fails_only_when_used():
    with mock.enable(lazy=True):
        import torch

        fft = torch.fft  # a placeholder, reading it is fine
        with pytest.raises(NotImplementedError, match=r"^mock_torch: torch\.fft is not implemented by oneflow"):
            fft.rfft(torch.ones(4))
    with mock.enable():
        import torch

        with pytest.raises(AttributeError):
            torch.fft


def test_disable_brings_back_what_was_imported_before():
    code = textwrap.dedent("""
        import sys
        import torch as real
        import oneflow as flow
        import oneflow.mock_torch as mock
        mock.enable()
        import torch
        assert torch.Tensor is flow.Tensor, torch
        mock.disable()
        import torch
        assert torch is real and torch.Tensor is not flow.Tensor
        with mock.enable():
            import torch
            assert torch.Tensor is flow.Tensor
        import torch
        assert torch is real
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], env=env_with(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_shell_line_turns_it_on_for_a_whole_command(tmp_path):
    r = subprocess.run([sys.executable, "-m", "oneflow.mock_torch"], env=env_with(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    stubs = os.path.dirname(mock.__file__)
    assert r.stdout.strip() == ("export ONEFLOW_MOCK_TORCH_LAZY=False; export ONEFLOW_MOCK_TORCH_VERBOSE=False; "
                                f"export PYTHONPATH={stubs}${{PYTHONPATH:+:$PYTHONPATH}}")
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent("""
        import torch, torchvision
        import torch.nn as nn
        from safetensors.torch import save_file
        import oneflow
        print(torch.Tensor is oneflow.Tensor, torchvision.models.mobilenet_v2.__module__)
    """))
    shell = f'eval "$({sys.executable} -m oneflow.mock_torch)" && {sys.executable} {script}'
    r = subprocess.run(["bash", "-c", shell], env=env_with(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True flowvision.models.mobilenetv2\n"
    r = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m oneflow.mock_torch)"; '
                                      f'eval "$({sys.executable} -m oneflow.mock_torch disable)"; echo $PYTHONPATH'],
                       env=env_with(), capture_output=True, text=True, timeout=60)
    assert stubs not in r.stdout and r.stdout.strip() == env_with()["PYTHONPATH"]
    # python3 -m torch.distributed.launch is our launcher.
    r = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m oneflow.mock_torch)" && '
                                      f'{sys.executable} -m torch.distributed.launch --help'],
                       env=env_with(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: python3 -m oneflow.distributed.launch"), r.stderr
