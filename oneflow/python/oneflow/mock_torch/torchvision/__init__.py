"""Stand-in for `torchvision` while oneflow/mock_torch is on PYTHONPATH (`eval $(python3 -m
oneflow.mock_torch)`): importing it turns oneflow.mock_torch on and gives the proxy in its place.
"""
from oneflow.mock_torch import _install_from_stub

_install_from_stub(__name__)
