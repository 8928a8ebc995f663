// Model gradient profiles: the published architectures' tensor counts and
// parameter totals, and the JSON profile file (round trip and bad input).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "boostcomm/error.h"
#include "workloads/model_profile.h"

namespace bm = boostcomm::workloads;

TEST(Models, ResNet50MatchesThePublishedArchitecture) {
  const bm::ModelProfile& p = bm::resnet50();
  EXPECT_EQ(p.tensors.size(), 161u);
  EXPECT_EQ(p.parameterCount(), 25557032u);  // torchvision resnet50: 25,557,032
  EXPECT_EQ(p.tensors.front().name, "conv1.weight");
  EXPECT_EQ(p.tensors.back().name, "fc.bias");
  // Forward work at 224x224 is ~4.1 G multiply-adds (8.2 Gflop); backward twice that.
  EXPECT_NEAR(p.backwardFlops() / 2 / 2 / 1e9, 4.1, 0.15);
}

TEST(Models, BertLargeMatchesThePublishedArchitecture) {
  const bm::ModelProfile& p = bm::bertLarge();
  EXPECT_EQ(p.tensors.size(), 5u + 24u * 16u + 2u + 7u);
  // BERT-Large is "340M" in the paper; the encoder alone is 24 * 12.6M.
  EXPECT_GT(p.parameterCount(), 330000000u);
  EXPECT_LT(p.parameterCount(), 345000000u);
  for (const bm::TensorProfile& t : p.tensors) EXPECT_GT(t.backwardFlops, 0) << t.name;
}

TEST(Models, BuiltinNamesResolve) {
  for (const std::string& name : bm::builtinProfileNames()) {
    ASSERT_TRUE(bm::builtinProfile(name).has_value()) << name;
    EXPECT_EQ(bm::loadProfile(name).tensors.size(), bm::builtinProfile(name)->tensors.size());
  }
  EXPECT_FALSE(bm::builtinProfile("resnet51").has_value());
}

namespace {
std::string writeTemp(const std::string& text) {
  char path[] = "/tmp/bc_profile_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::ofstream(path) << text;
  close(fd);
  return path;
}
std::string loadError(const std::string& path) {
  try {
    bm::loadProfile(path);
  } catch (const boostcomm::Error& e) {
    EXPECT_EQ(e.category(), boostcomm::ErrorCategory::kInvalidArgument);
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(Models, JsonRoundTripKeepsEveryTensor) {
  const std::string path = writeTemp(bm::profileToJson(bm::resnet50()));
  const bm::ModelProfile loaded = bm::loadProfile(path);
  std::remove(path.c_str());
  ASSERT_EQ(loaded.tensors.size(), bm::resnet50().tensors.size());
  for (std::size_t i = 0; i < loaded.tensors.size(); ++i) {
    EXPECT_EQ(loaded.tensors[i].name, bm::resnet50().tensors[i].name);
    EXPECT_EQ(loaded.tensors[i].shape, bm::resnet50().tensors[i].shape);
    EXPECT_EQ(loaded.tensors[i].dtype, bm::resnet50().tensors[i].dtype);
    EXPECT_DOUBLE_EQ(loaded.tensors[i].backwardFlops, bm::resnet50().tensors[i].backwardFlops);
  }
  EXPECT_EQ(loaded.name, "resnet50");
}

TEST(Models, BadProfilesNameTheProblem) {
  EXPECT_NE(loadError("/nonexistent/profile.json").find("neither a built-in profile (resnet50, bert-large)"),
            std::string::npos);
  const std::string notJson = writeTemp("{ tensors: ");
  EXPECT_NE(loadError(notJson).find("not valid JSON"), std::string::npos);
  const std::string noTensors = writeTemp(R"({"name": "x"})");
  EXPECT_NE(loadError(noTensors).find("missing array \"tensors\""), std::string::npos);
  const std::string badDim = writeTemp(R"({"tensors": [{"name": "w", "shape": [3, -1]}]})");
  EXPECT_NE(loadError(badDim).find("tensor 0 (w): shape entries must be integers >= 0"), std::string::npos);
  const std::string badType = writeTemp(R"({"tensors": [{"shape": [3], "dtype": "complex64"}]})");
  EXPECT_NE(loadError(badType).find("unknown dtype 'complex64'"), std::string::npos);
  for (const std::string& p : {notJson, noTensors, badDim, badType}) std::remove(p.c_str());
}

TEST(Models, EmptyAndScalarShapes) {
  bm::TensorProfile scalar{"s", {}, boostcomm::DataType::kFloat32, 0};
  bm::TensorProfile empty{"e", {4, 0}, boostcomm::DataType::kFloat16, 0};
  EXPECT_EQ(scalar.count(), 1u);
  EXPECT_EQ(empty.count(), 0u);
  EXPECT_EQ(empty.bytes(), 0u);
}
