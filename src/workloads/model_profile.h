// Gradient profiles of real models: every trainable tensor of the network
// with its shape, dtype and the backward-pass work of the layer it belongs to.
// Used by the fusion benchmark, the training replay and the simulator.
//
// Built-in profiles are generated from the published architectures (layer by
// layer, see model_profile.cc for the sources); other models load from a JSON
// profile file (format in docs/PROFILES.md):
//   {"name": "...", "source": "...", "tensors": [
//      {"name": "conv1.weight", "shape": [64, 3, 7, 7], "dtype": "float32", "backward_flops": 2.3e8}, ...]}
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::workloads {

struct TensorProfile {
  std::string name;                 // e.g. "layer1.0.conv1.weight"
  std::vector<std::int64_t> shape;  // e.g. {64, 64, 1, 1}
  DataType dtype = DataType::kFloat32;
  // Floating-point operations of the backward pass attributed to this
  // tensor, per training sample (the layer's weight tensor carries the layer's
  // work; biases and norms their own small share). Only ratios matter to the
  // replay, which scales compute to a target communication share.
  double backwardFlops = 0;

  std::size_t count() const;  // product of shape (1 for a scalar, 0 if any dim is 0)
  std::size_t bytes() const { return count() * dataTypeSize(dtype); }
};

struct ModelProfile {
  std::string name;
  std::string source;                  // where the shapes come from
  std::vector<TensorProfile> tensors;  // declaration (forward) order; gradients arrive in reverse

  std::size_t parameterCount() const;
  std::size_t bytes() const;
  double backwardFlops() const;  // per sample
};

// Building blocks of the built-in profiles (one float32 tensor per call, in
// declaration order). appendTensor adds one tensor; appendNorm a
// normalisation layer's weight and bias, {channels} each, splitting the
// layer's backward work equally between them.
void appendTensor(ModelProfile& profile, std::string name, std::vector<std::int64_t> shape, double backwardFlops);
void appendNorm(ModelProfile& profile, const std::string& name, std::int64_t channels, double backwardFlops);

// ResNet-50 (He et al. 2015, torchvision layout): 161 tensors, 25,557,032 parameters.
const ModelProfile& resnet50();
// BERT-Large, uncased (Devlin et al. 2018: 24 layers, hidden 1024, 16 heads, FFN 4096,
// vocab 30522, 512 positions) with the pre-training heads, sequence length 128.
const ModelProfile& bertLarge();

// "resnet50", "bert-large" (also "bert_large"); empty if unknown.
std::optional<ModelProfile> builtinProfile(std::string_view name);
std::vector<std::string> builtinProfileNames();
// A built-in name, or a path to a JSON profile file. Throws Error{kInvalidArgument}
// naming the file and the bad entry.
ModelProfile loadProfile(std::string_view nameOrPath);
// The profile in `text` (a file's contents); `path` names it in messages.
// Same errors as loadProfile. A file whose tensors add up to more than
// kMaxProfileBytes (or whose shape products overflow) is rejected: the
// replay and the fusion benchmark allocate what a profile says.
ModelProfile parseProfileText(std::string_view text, std::string_view path);
inline constexpr std::size_t kMaxProfileBytes = std::size_t{1} << 40;
std::string profileToJson(const ModelProfile& profile);

}  // namespace boostcomm::workloads
