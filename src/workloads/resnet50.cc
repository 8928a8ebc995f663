// ResNet-50 gradient profile, generated layer by layer from the architecture.
//
// Source: K. He, X. Zhang, S. Ren, J. Sun, "Deep Residual Learning for Image
// Recognition", CVPR 2016 (arXiv:1512.03385), Table 1, 50-layer column:
// conv1 7x7/2 64; 3x3 max pool /2; stages of [3, 4, 6, 3] bottleneck blocks
// (1x1 w, 3x3 w, 1x1 4w; w = 64, 128, 256, 512); global pool; fc 1000.
// Parameter names and order follow torchvision's resnet50 (the "v1.5"
// variant: the stride sits on the 3x3 conv; a 1x1 projection conv + norm,
// "downsample", on the first block of each stage; convolutions have no bias;
// every norm has a weight and a bias). 161 tensors, 25,557,032 parameters.
//
// Work per sample at 224x224: a convolution's forward pass is
// 2 * Cin * K * K * Cout * Hout * Wout flops; its backward pass (input and
// weight gradients) twice that. Norms: ~10 flops per output element in
// backward, split between weight and bias.
#include <string>

#include "workloads/model_profile.h"

namespace boostcomm::workloads {
namespace {

class ResNetBuilder {
 public:
  explicit ResNetBuilder(ModelProfile& profile) : profile_(profile) {}

  void conv(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t outSide) {
    const double forward = 2.0 * static_cast<double>(in * kernel * kernel * out * outSide * outSide);
    appendTensor(profile_, name + ".weight", {out, in, kernel, kernel}, 2.0 * forward);
  }
  void norm(const std::string& name, std::int64_t channels, std::int64_t side) {
    appendNorm(profile_, name, channels, 10.0 * static_cast<double>(channels * side * side));
  }

 private:
  ModelProfile& profile_;
};

ModelProfile buildResNet50() {
  ModelProfile profile;
  profile.name = "resnet50";
  profile.source =
      "He et al., Deep Residual Learning for Image Recognition (arXiv:1512.03385), Table 1, 50-layer; "
      "torchvision resnet50 parameter layout; 224x224 input";
  ResNetBuilder b(profile);
  std::int64_t side = 112;  // after conv1 (stride 2)
  b.conv("conv1", 3, 64, 7, side);
  b.norm("bn1", 64, side);
  side = 56;  // after the 3x3/2 max pool
  std::int64_t channels = 64;
  const int blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t width = std::int64_t{64} << stage;
    for (int block = 0; block < blocks[stage]; ++block) {
      const std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      const std::int64_t stride = (block == 0 && stage > 0) ? 2 : 1;
      const std::int64_t outSide = side / stride;
      b.conv(prefix + ".conv1", channels, width, 1, side);
      b.norm(prefix + ".bn1", width, side);
      b.conv(prefix + ".conv2", width, width, 3, outSide);
      b.norm(prefix + ".bn2", width, outSide);
      b.conv(prefix + ".conv3", width, 4 * width, 1, outSide);
      b.norm(prefix + ".bn3", 4 * width, outSide);
      if (block == 0) {
        b.conv(prefix + ".downsample.0", channels, 4 * width, 1, outSide);
        b.norm(prefix + ".downsample.1", 4 * width, outSide);
      }
      channels = 4 * width;
      side = outSide;
    }
  }
  const double fcForward = 2.0 * 2048 * 1000;
  appendTensor(profile, "fc.weight", {1000, 2048}, 2.0 * fcForward);
  appendTensor(profile, "fc.bias", {1000}, 2.0 * 1000);
  return profile;
}

}  // namespace

const ModelProfile& resnet50() {
  static const ModelProfile profile = buildResNet50();
  return profile;
}

}  // namespace boostcomm::workloads
