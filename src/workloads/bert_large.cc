// BERT-Large gradient profile, generated layer by layer from the architecture.
//
// Source: J. Devlin, M.-W. Chang, K. Lee, K. Toutanova, "BERT: Pre-training of
// Deep Bidirectional Transformers for Language Understanding", NAACL 2019
// (arXiv:1810.04805), BERT-LARGE: L = 24 layers, H = 1024, A = 16 heads,
// feed-forward 4H = 4096; uncased WordPiece vocabulary of 30,522 tokens, 512
// positions, 2 segment types. Parameter names and order follow the common
// PyTorch BertForPreTraining layout: embeddings, 24 encoder layers (16 tensors
// each), pooler, and the two pre-training heads (masked-LM transform + output
// bias, whose decoder weight is tied to the word embeddings, and next-sentence
// classifier). 398 tensors, 336,226,108 parameters.
//
// Work per sample, sequence length 128: a linear layer in -> out is
// 2 * in * out * S flops forward and twice that backward; attention's two
// S x S x H products (scores and weighted values) add 4 * S * S * H forward,
// charged to the value projection. The masked-LM decoder (H x vocab, tied) is
// charged to cls.predictions.bias, the head's own tensor: it is the first
// work of backward, while the tied embedding gradient is complete only at the
// very end. All positions are scored (as BertForPreTraining does).
#include <string>

#include "workloads/model_profile.h"

namespace boostcomm::workloads {
namespace {

constexpr std::int64_t kLayers = 24;
constexpr std::int64_t kHidden = 1024;
constexpr std::int64_t kFfn = 4096;
constexpr std::int64_t kVocab = 30522;
constexpr std::int64_t kPositions = 512;
constexpr std::int64_t kSegments = 2;
constexpr double kSeq = 128;

class BertBuilder {
 public:
  explicit BertBuilder(ModelProfile& profile) : profile_(profile) {}

  // Backward work of a linear layer in -> out over the sequence (+ extra forward flops).
  void linear(const std::string& name, std::int64_t in, std::int64_t out, double extraForward = 0) {
    const double forward = 2.0 * static_cast<double>(in * out) * kSeq + extraForward;
    appendTensor(profile_, name + ".weight", {out, in}, 2.0 * forward);
    appendTensor(profile_, name + ".bias", {out}, 2.0 * static_cast<double>(out) * kSeq);
  }
  void layerNorm(const std::string& name) {
    appendNorm(profile_, name, kHidden, 10.0 * static_cast<double>(kHidden) * kSeq);
  }

 private:
  ModelProfile& profile_;
};

ModelProfile buildBertLarge() {
  ModelProfile profile;
  profile.name = "bert-large";
  profile.source =
      "Devlin et al., BERT (arXiv:1810.04805), BERT-LARGE L=24 H=1024 A=16, vocab 30522; "
      "BertForPreTraining parameter layout; sequence length 128";
  BertBuilder b(profile);
  // Embedding backward is a scatter-add of S rows of H.
  const double embedding = static_cast<double>(kHidden) * kSeq;
  appendTensor(profile, "bert.embeddings.word_embeddings.weight", {kVocab, kHidden}, embedding);
  appendTensor(profile, "bert.embeddings.position_embeddings.weight", {kPositions, kHidden}, embedding);
  appendTensor(profile, "bert.embeddings.token_type_embeddings.weight", {kSegments, kHidden}, embedding);
  b.layerNorm("bert.embeddings.LayerNorm");
  const double attention = 4.0 * kSeq * kSeq * static_cast<double>(kHidden);
  for (std::int64_t layer = 0; layer < kLayers; ++layer) {
    const std::string p = "bert.encoder.layer." + std::to_string(layer);
    b.linear(p + ".attention.self.query", kHidden, kHidden);
    b.linear(p + ".attention.self.key", kHidden, kHidden);
    b.linear(p + ".attention.self.value", kHidden, kHidden, attention);
    b.linear(p + ".attention.output.dense", kHidden, kHidden);
    b.layerNorm(p + ".attention.output.LayerNorm");
    b.linear(p + ".intermediate.dense", kHidden, kFfn);
    b.linear(p + ".output.dense", kFfn, kHidden);
    b.layerNorm(p + ".output.LayerNorm");
  }
  b.linear("bert.pooler.dense", kHidden, kHidden);
  const double decoder = 2.0 * 2.0 * static_cast<double>(kHidden * kVocab) * kSeq;
  appendTensor(profile, "cls.predictions.bias", {kVocab}, decoder);
  b.linear("cls.predictions.transform.dense", kHidden, kHidden);
  b.layerNorm("cls.predictions.transform.LayerNorm");
  b.linear("cls.seq_relationship", kHidden, 2);
  return profile;
}

}  // namespace

const ModelProfile& bertLarge() {
  static const ModelProfile profile = buildBertLarge();
  return profile;
}

}  // namespace boostcomm::workloads
