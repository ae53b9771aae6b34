"""Import shims for running the Metrix release (b679703) with this repository's packages.

Only imports are adapted, never the maths. The release builds ``torchvision.models.resnet50``
(positional ``pretrained``); the torchvision wheel of this environment does not load with its
torch, so ``resnet50`` here is gspdml's ResNet-50, which has torchvision's layout and parameter
names (conv1, bn1, relu, maxpool, layer1-4), plus torchvision's 1000-way ``fc`` that the release
reads ``in_features`` from and never calls. The parity tests build it without ImageNet weights;
both sides then start from the same random weights.
"""

from torch import nn

from gspdml.models.backbones.resnet import ResNet50


def resnet50(pretrained=False):
    if pretrained:
        raise ValueError("the parity tests build the Metrix ResNet-50 without downloaded weights")
    model = ResNet50()
    model.fc = nn.Linear(model.out_channels, 1000)
    return model
