"""Prints the shell line that turns oneflow.mock_torch on (or off) for whole commands.

    eval $(python3 -m oneflow.mock_torch)            # import torch -> oneflow in every process
    eval $(python3 -m oneflow.mock_torch --lazy)     # missing names fail only when used
    eval $(python3 -m oneflow.mock_torch disable)

It puts oneflow/mock_torch (whose torch/, torchvision/ and safetensors/ stand-ins turn the mock
on when imported) first on PYTHONPATH, so it also reaches processes the command starts.
"""
import argparse
import os
import shlex

from oneflow.mock_torch import STUBS


def main():
    parser = argparse.ArgumentParser(prog="python3 -m oneflow.mock_torch", description=__doc__.splitlines()[0])
    parser.add_argument("mock", nargs="?", choices=["enable", "disable"], default="enable")
    parser.add_argument("--lazy", action="store_true", help="missing names fail when used, not when read")
    parser.add_argument("--verbose", action="store_true", help="report each missing name on stderr")
    args = parser.parse_args()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != STUBS]
    if args.mock == "enable":
        print(f"export ONEFLOW_MOCK_TORCH_LAZY={args.lazy}; export ONEFLOW_MOCK_TORCH_VERBOSE={args.verbose}; "
              f"export PYTHONPATH={shlex.quote(STUBS)}${{PYTHONPATH:+:$PYTHONPATH}}")
    else:
        print(f"export PYTHONPATH={shlex.quote(os.pathsep.join(paths))}; "
              "unset ONEFLOW_MOCK_TORCH_LAZY; unset ONEFLOW_MOCK_TORCH_VERBOSE")


if __name__ == "__main__":
    main()
