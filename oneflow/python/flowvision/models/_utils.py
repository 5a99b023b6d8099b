"""What the model builders share: torchvision's channel rounding and the refusal of pretrained
weights (they come from the network, which this machine does not have).

    model = resnet18(pretrained=False, num_classes=10)
"""


def _make_divisible(v, divisor, min_value=None):
    """The nearest multiple of divisor to v, never below min_value (default divisor) nor more
    than 10% below v (torchvision's rule for MobileNet channel counts)."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def check_no_pretrained(arch, pretrained=False, weights=None):
    """pretrained=True (flowvision's and old torchvision's flag) or weights= (torchvision's):
    both need a download, so both are refused with the way out."""
    if pretrained or weights is not None:
        what = "pretrained=True" if pretrained else f"weights={weights!r}"
        raise ValueError(
            f"{arch}: {what} needs the published weights, which this build cannot download (no "
            f"network); build the model with pretrained=False and load a local file with "
            f"model.load_state_dict(flow.load(path)) (PyTorch's .pth files load too)"
        )
