// Profile arithmetic, the built-in registry and the JSON profile file.
#include "workloads/model_profile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"

namespace boostcomm::workloads {

std::size_t TensorProfile::count() const {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t ModelProfile::parameterCount() const {
  std::size_t n = 0;
  for (const TensorProfile& t : tensors) n += t.count();
  return n;
}

std::size_t ModelProfile::bytes() const {
  std::size_t n = 0;
  for (const TensorProfile& t : tensors) n += t.bytes();
  return n;
}

double ModelProfile::backwardFlops() const {
  double flops = 0;
  for (const TensorProfile& t : tensors) flops += t.backwardFlops;
  return flops;
}

void appendTensor(ModelProfile& profile, std::string name, std::vector<std::int64_t> shape, double backwardFlops) {
  profile.tensors.push_back(TensorProfile{std::move(name), std::move(shape), DataType::kFloat32, backwardFlops});
}

void appendNorm(ModelProfile& profile, const std::string& name, std::int64_t channels, double backwardFlops) {
  appendTensor(profile, name + ".weight", {channels}, backwardFlops / 2);
  appendTensor(profile, name + ".bias", {channels}, backwardFlops / 2);
}

std::vector<std::string> builtinProfileNames() { return {"resnet50", "bert-large"}; }

std::optional<ModelProfile> builtinProfile(std::string_view name) {
  if (name == "resnet50" || name == "resnet-50") return resnet50();
  if (name == "bert-large" || name == "bert_large" || name == "bertlarge") return bertLarge();
  return std::nullopt;
}

namespace {

// Throws kInvalidArgument naming the file and, when known, the tensor entry.
[[noreturn]] void badProfile(std::string_view path, const std::string& what) {
  core::raise(ErrorCategory::kInvalidArgument, -1, "profile file '" + std::string(path) + "': " + what);
}

ModelProfile parseProfile(std::string_view path, const nlohmann::json& doc) {
  if (!doc.is_object()) badProfile(path, "the top level must be an object with \"tensors\"");
  if (!doc.contains("tensors") || !doc["tensors"].is_array()) badProfile(path, "missing array \"tensors\"");
  ModelProfile profile;
  profile.name = doc.value("name", std::string(path));
  profile.source = doc.value("source", std::string("profile file ") + std::string(path));
  std::size_t index = 0;
  std::size_t totalBytes = 0;
  for (const nlohmann::json& entry : doc["tensors"]) {
    const std::string where = "tensor " + std::to_string(index);
    if (!entry.is_object() || !entry.contains("shape") || !entry["shape"].is_array()) {
      badProfile(path, where + ": needs \"shape\": [dims...]");
    }
    TensorProfile tensor;
    tensor.name = entry.value("name", where);
    for (const nlohmann::json& d : entry["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0) {
        badProfile(path, where + " (" + tensor.name + "): shape entries must be integers >= 0");
      }
      tensor.shape.push_back(d.get<std::int64_t>());
    }
    // Checked products: a corrupt shape must not wrap to a small size.
    std::size_t count = 1;
    for (const std::int64_t dim : tensor.shape) {
      const auto n = static_cast<std::size_t>(dim);
      if (n != 0 && count > kMaxProfileBytes / n) badProfile(path, where + " (" + tensor.name + "): shape is too large");
      count *= n;
    }
    const std::string dtype = entry.value("dtype", std::string("float32"));
    const std::optional<DataType> parsed = parseDataType(dtype);
    if (!parsed) badProfile(path, where + " (" + tensor.name + "): unknown dtype '" + dtype + "'");
    tensor.dtype = *parsed;
    totalBytes += count * dataTypeSize(tensor.dtype);
    if (totalBytes > kMaxProfileBytes) {
      badProfile(path, where + " (" + tensor.name + "): the tensors add up to more than " +
                           std::to_string(kMaxProfileBytes) + " bytes");
    }
    tensor.backwardFlops = entry.value("backward_flops", 0.0);
    if (tensor.backwardFlops < 0) badProfile(path, where + " (" + tensor.name + "): backward_flops must be >= 0");
    profile.tensors.push_back(std::move(tensor));
    ++index;
  }
  return profile;
}

}  // namespace

ModelProfile loadProfile(std::string_view nameOrPath) {
  if (std::optional<ModelProfile> builtin = builtinProfile(nameOrPath)) return *std::move(builtin);
  std::ifstream in{std::string(nameOrPath)};
  if (!in) {
    std::string names;
    for (const std::string& n : builtinProfileNames()) names += (names.empty() ? "" : ", ") + n;
    core::raise(ErrorCategory::kInvalidArgument, -1,
                "model '" + std::string(nameOrPath) + "' is neither a built-in profile (" + names +
                    ") nor a readable profile file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parseProfileText(text.str(), nameOrPath);
}

ModelProfile parseProfileText(std::string_view text, std::string_view path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    badProfile(path, std::string("not valid JSON: ") + e.what());
  }
  try {
    return parseProfile(path, doc);
  } catch (const nlohmann::json::exception& e) {
    badProfile(path, std::string("unexpected value: ") + e.what());
  }
}

std::string profileToJson(const ModelProfile& profile) {
  nlohmann::json doc;
  doc["name"] = profile.name;
  doc["source"] = profile.source;
  doc["tensors"] = nlohmann::json::array();
  for (const TensorProfile& t : profile.tensors) {
    doc["tensors"].push_back({{"name", t.name},
                              {"shape", t.shape},
                              {"dtype", std::string(toString(t.dtype))},
                              {"backward_flops", t.backwardFlops}});
  }
  return doc.dump(1);
}

}  // namespace boostcomm::workloads
