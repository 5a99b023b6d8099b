"""VGG-11/13/16/19 (and _bn variants) with torchvision's module names (features, avgpool,
classifier).

    model = flowvision.models.vgg11(num_classes=10)
"""
import oneflow as flow
from oneflow import nn
from flowvision.models._utils import check_no_pretrained

__all__ = ["VGG", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"]

cfgs = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, features, num_classes=1000, init_weights=True, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(flow.flatten(x, 1))


def make_layers(cfg, batch_norm=False):
    layers, in_channels = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        in_channels = v
    return nn.Sequential(*layers)


def _vgg(arch, cfg, batch_norm, pretrained, weights, kwargs):
    check_no_pretrained(arch, pretrained, weights)
    return VGG(make_layers(cfgs[cfg], batch_norm=batch_norm), **kwargs)


def vgg11(pretrained=False, progress=True, *, weights=None, **kwargs):
    """VGG-11, configuration "A" (132.9M parameters at num_classes=1000)."""
    return _vgg("vgg11", "A", False, pretrained, weights, kwargs)


def vgg11_bn(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg11_bn", "A", True, pretrained, weights, kwargs)


def vgg13(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg13", "B", False, pretrained, weights, kwargs)


def vgg13_bn(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg13_bn", "B", True, pretrained, weights, kwargs)


def vgg16(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg16", "D", False, pretrained, weights, kwargs)


def vgg16_bn(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg16_bn", "D", True, pretrained, weights, kwargs)


def vgg19(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg19", "E", False, pretrained, weights, kwargs)


def vgg19_bn(pretrained=False, progress=True, *, weights=None, **kwargs):
    return _vgg("vgg19_bn", "E", True, pretrained, weights, kwargs)
