#include "tokenizer/spec_sentencepiece.h"

#include <cstring>
#include <string_view>

namespace fak {
namespace {

// Minimal protobuf wire-format reader: varints, 32/64-bit fixed, length-delimited fields.
class Wire {
 public:
  Wire(std::span<const uint8_t> b, size_t base) : b_(b), base_(base) {}
  bool done() const { return pos_ >= b_.size(); }
  size_t offset() const { return base_ + pos_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return false;
      const uint8_t c = b_[pos_++];
      *v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  }
  // Reads a field's key and, for length-delimited fields, its bytes; skips other wire types' values
  // into *scalar.
  bool Field(uint32_t* number, uint32_t* wire_type, uint64_t* scalar, std::span<const uint8_t>* bytes,
             size_t* bytes_offset) {
    uint64_t key;
    if (!Varint(&key)) return false;
    *number = static_cast<uint32_t>(key >> 3);
    *wire_type = static_cast<uint32_t>(key & 7);
    switch (*wire_type) {
      case 0: return Varint(scalar);
      case 1:
        if (b_.size() - pos_ < 8) return false;
        std::memcpy(scalar, b_.data() + pos_, 8);
        pos_ += 8;
        return true;
      case 5: {
        if (b_.size() - pos_ < 4) return false;
        uint32_t v;
        std::memcpy(&v, b_.data() + pos_, 4);
        *scalar = v;
        pos_ += 4;
        return true;
      }
      case 2: {
        uint64_t len;
        if (!Varint(&len) || len > b_.size() - pos_) return false;
        *bytes = b_.subspan(pos_, len);
        *bytes_offset = base_ + pos_;
        pos_ += len;
        return true;
      }
      default: return false;
    }
  }

 private:
  std::span<const uint8_t> b_;
  size_t base_;
  size_t pos_ = 0;
};

float AsFloat(uint64_t bits) {
  const auto v = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}

#define FAK_WIRE_FIELD(wire, src, what)                                                          \
  uint32_t number = 0, wire_type = 0;                                                            \
  uint64_t scalar = 0;                                                                           \
  std::span<const uint8_t> bytes;                                                                \
  size_t bytes_offset = 0;                                                                       \
  if (!(wire).Field(&number, &wire_type, &scalar, &bytes, &bytes_offset)) {                      \
    return Corrupt("{}: offset {}: malformed protobuf field in {}", src, (wire).offset(), what); \
  }

}  // namespace

Result<TokenizerSpec> TokenizerSpecFromSentencePiece(std::span<const uint8_t> data,
                                                     const std::string& source) {
  TokenizerSpec spec;
  spec.source = source;
  spec.model = TokenizerModel::kSpm;
  spec.byte_level = false;
  spec.metaspace = true;
  spec.add_space_prefix = true;  // normalizer_spec.add_dummy_prefix defaults to true
  spec.add_bos = true;
  int64_t model_type = 1;  // UNIGRAM unless the trainer spec says otherwise
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.pad_id = -1;

  Wire top(data, 0);
  while (!top.done()) {
    FAK_WIRE_FIELD(top, source, "ModelProto");
    if (number == 1 && wire_type == 2) {  // repeated SentencePiece pieces
      std::string piece;
      float score = 0;
      int64_t type = 1;
      Wire w(bytes, bytes_offset);
      while (!w.done()) {
        uint32_t n = 0, wt = 0;
        uint64_t v = 0;
        std::span<const uint8_t> b;
        size_t bo = 0;
        if (!w.Field(&n, &wt, &v, &b, &bo)) {
          return Corrupt("{}: offset {}: malformed piece {}", source, w.offset(), spec.tokens.size());
        }
        if (n == 1 && wt == 2) piece.assign(reinterpret_cast<const char*>(b.data()), b.size());
        if (n == 2 && wt == 5) score = AsFloat(v);
        if (n == 3 && wt == 0) type = static_cast<int64_t>(v);
      }
      if (type < 1 || type > 6) {
        return Corrupt("{}: piece {} ('{}') has type {}, want 1..6", source, spec.tokens.size(), piece, type);
      }
      spec.tokens.push_back(std::move(piece));
      spec.scores.push_back(score);
      spec.types.push_back(static_cast<TokenType>(type));
    } else if (number == 2 && wire_type == 2) {  // TrainerSpec
      Wire w(bytes, bytes_offset);
      while (!w.done()) {
        uint32_t n = 0, wt = 0;
        uint64_t v = 0;
        std::span<const uint8_t> b;
        size_t bo = 0;
        if (!w.Field(&n, &wt, &v, &b, &bo))
          return Corrupt("{}: offset {}: malformed trainer_spec", source, w.offset());
        if (wt != 0) continue;
        const auto iv = static_cast<int32_t>(static_cast<int64_t>(v));
        if (n == 3) model_type = iv;
        if (n == 35) spec.byte_fallback = v != 0;
        if (n == 40) spec.unk_id = iv;
        if (n == 41) spec.bos_id = iv;
        if (n == 42) spec.eos_id = iv;
        if (n == 43) spec.pad_id = iv;
      }
    } else if (number == 3 && wire_type == 2) {  // NormalizerSpec
      Wire w(bytes, bytes_offset);
      while (!w.done()) {
        uint32_t n = 0, wt = 0;
        uint64_t v = 0;
        std::span<const uint8_t> b;
        size_t bo = 0;
        if (!w.Field(&n, &wt, &v, &b, &bo)) {
          return Corrupt("{}: offset {}: malformed normalizer_spec", source, w.offset());
        }
        if (n == 3 && wt == 0) spec.add_space_prefix = v != 0;
        if (n == 4 && wt == 0) remove_extra_whitespaces = v != 0;
        if (n == 5 && wt == 0) escape_whitespaces = v != 0;
      }
    }
  }
  if (spec.tokens.empty()) return Corrupt("{}: no pieces (not a SentencePiece model?)", source);
  if (model_type != 2) {
    return Unsupported("{}: SentencePiece model type {} is not supported (only BPE, type 2)", source,
                       model_type);
  }
  if (remove_extra_whitespaces || !escape_whitespaces) {
    return Unsupported("{}: SentencePiece normalizer that {} is not supported", source,
                       remove_extra_whitespaces ? "removes extra whitespace" : "keeps spaces unescaped");
  }
  return spec;
}

}  // namespace fak
