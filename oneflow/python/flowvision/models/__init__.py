"""Model builders with torchvision's names, signatures and attributes.

    model = flowvision.models.mobilenet_v2()            # model.last_channel, model.classifier
    model = flowvision.models.resnet18(num_classes=10)  # model.fc
    model = flowvision.models.vgg11(num_classes=10)
    model = flowvision.models.lenet(num_classes=10)

Weights start as torchvision initialises them; pretrained weights need the network and are
refused with the way to load a local file instead.
"""
from flowvision.models.lenet import LeNet, lenet
from flowvision.models.mobilenetv2 import MobileNetV2, mobilenet_v2
from flowvision.models.resnet import ResNet, resnet18, resnet34, resnet50, resnet101, resnet152
from flowvision.models.vgg import VGG, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

__all__ = [
    "LeNet", "MobileNetV2", "ResNet", "VGG", "lenet", "mobilenet_v2", "resnet18", "resnet34",
    "resnet50", "resnet101", "resnet152", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16",
    "vgg16_bn", "vgg19", "vgg19_bn",
]
