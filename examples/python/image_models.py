"""Image classifiers for the examples and benchmarks: torchvision's when it
imports, else the same ResNet architectures defined here.

Why both: the CPU build of torch the project tests (2.13.0) has no matching
torchvision on PyPI (PyPI's torchvision fails to import beside it), yet the
DDP examples are about ResNets. The ResNets below follow the published
design (He et al. 2015, "Deep Residual Learning", v1.5: the stride on the
3x3 convolution of a bottleneck) with torchvision's parameter shapes and
registration order, so gradient sizes and DDP buckets are the same:
resnet18 11,181,642 parameters and resnet50 23,528,522 with num_classes=10.

    model = image_models.build("resnet18", num_classes=10)
"""
import torch.nn as nn


def _conv_bn(c_in, c_out, kernel, stride):
    return [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(c_out)]


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, c_in, width, stride):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(c_in, width, 3, stride)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = _conv_bn(width, width, 3, 1)
        self.downsample = _shortcut(c_in, width, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (self.downsample(x) if self.downsample is not None else x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in, width, stride):
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(c_in, width, 1, 1)
        self.conv2, self.bn2 = _conv_bn(width, width, 3, stride)
        self.conv3, self.bn3 = _conv_bn(width, width * 4, 1, 1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(c_in, width * 4, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (self.downsample(x) if self.downsample is not None else x))


def _shortcut(c_in, c_out, stride):
    """A 1x1 projection where the block changes shape, else identity (None)."""
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(*_conv_bn(c_in, c_out, 1, stride))


class ResNet(nn.Module):
    def __init__(self, block, depths, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in = 64
        for i, (width, depth) in enumerate(zip((64, 128, 256, 512), depths)):
            blocks = []
            for j in range(depth):
                blocks.append(block(c_in, width, 2 if (j == 0 and i > 0) else 1))
                c_in = width * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


_OURS = {
    "resnet18": lambda **kw: ResNet(_Basic, (2, 2, 2, 2), **kw),
    "resnet34": lambda **kw: ResNet(_Basic, (3, 4, 6, 3), **kw),
    "resnet50": lambda **kw: ResNet(_Bottleneck, (3, 4, 6, 3), **kw),
    "resnet101": lambda **kw: ResNet(_Bottleneck, (3, 4, 23, 3), **kw),
}


def source():
    """'torchvision' when it imports, else 'boostcomm examples' (the ResNets here)."""
    try:
        import torchvision  # noqa: F401
        return "torchvision"
    except Exception:  # noqa: BLE001 - PyPI's torchvision raises RuntimeError beside torch 2.13.0+cpu
        return "boostcomm examples"


def build(name, **kwargs):
    """torchvision.models.<name>(**kwargs) when torchvision imports, else our ResNet of that name."""
    if source() == "torchvision":
        import torchvision
        if hasattr(torchvision.models, name):
            return getattr(torchvision.models, name)(**kwargs)
    if name not in _OURS:
        raise ValueError(f"image model {name!r}: torchvision is not importable here and the built-in models are "
                         f"{', '.join(sorted(_OURS))}")
    return _OURS[name](**kwargs)
