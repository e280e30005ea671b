#include "formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/byte_reader.h"

namespace fak {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // nested arrays beyond this are hostile, not useful
// A GGUF string or array count is checked against the bytes left before anything is allocated, so a
// count near 2^64 fails as "truncated" instead of exhausting memory.

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

uint64_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString: return 8;  // at least its length prefix
    case GgufValueType::kArray: return 12;  // at least type + count
  }
  return 1;
}

Result<std::string> ReadString(ByteReader& r, std::string_view what) {
  const size_t at = r.offset();
  FAK_ASSIGN_OR_RETURN(uint64_t len, r.Read<uint64_t>(what));
  if (len > r.remaining()) {
    return Corrupt("{}: offset {}: {} length {} exceeds the {} bytes left in the file", r.source(), at, what,
                   len, r.remaining());
  }
  FAK_ASSIGN_OR_RETURN(auto bytes, r.ReadBytes(len, what));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Result<GgufValue> ReadValue(ByteReader& r, GgufValueType type, const std::string& key, int depth);

Result<GgufValue> ReadArray(ByteReader& r, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) return r.Error("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
  const size_t at = r.offset();
  FAK_ASSIGN_OR_RETURN(uint32_t et, r.Read<uint32_t>("array element type"));
  if (!IsKnownValueType(et)) {
    return Corrupt("{}: offset {}: key '{}': unknown array element type {}", r.source(), at, key, et);
  }
  FAK_ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>("array length"));
  const auto etype = static_cast<GgufValueType>(et);
  if (n > r.remaining() / ScalarSize(etype)) {
    return Corrupt("{}: offset {}: key '{}': array of {} {} elements exceeds the {} bytes left", r.source(),
                   at, key, n, GgufValueTypeName(etype), r.remaining());
  }
  auto arr = std::make_shared<GgufArray>();
  arr->element_type = etype;
  arr->values.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    FAK_ASSIGN_OR_RETURN(GgufValue v, ReadValue(r, etype, key, depth + 1));
    arr->values.push_back(std::move(v));
  }
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.v = std::move(arr);
  return out;
}

Result<GgufValue> ReadValue(ByteReader& r, GgufValueType type, const std::string& key, int depth) {
  GgufValue out;
  out.type = type;
  switch (type) {
    case GgufValueType::kUint8: {
      FAK_ASSIGN_OR_RETURN(uint8_t x, r.Read<uint8_t>("u8 value"));
      out.v = uint64_t{x};
      break;
    }
    case GgufValueType::kUint16: {
      FAK_ASSIGN_OR_RETURN(uint16_t x, r.Read<uint16_t>("u16 value"));
      out.v = uint64_t{x};
      break;
    }
    case GgufValueType::kUint32: {
      FAK_ASSIGN_OR_RETURN(uint32_t x, r.Read<uint32_t>("u32 value"));
      out.v = uint64_t{x};
      break;
    }
    case GgufValueType::kUint64: {
      FAK_ASSIGN_OR_RETURN(uint64_t x, r.Read<uint64_t>("u64 value"));
      out.v = x;
      break;
    }
    case GgufValueType::kInt8: {
      FAK_ASSIGN_OR_RETURN(int8_t x, r.Read<int8_t>("i8 value"));
      out.v = int64_t{x};
      break;
    }
    case GgufValueType::kInt16: {
      FAK_ASSIGN_OR_RETURN(int16_t x, r.Read<int16_t>("i16 value"));
      out.v = int64_t{x};
      break;
    }
    case GgufValueType::kInt32: {
      FAK_ASSIGN_OR_RETURN(int32_t x, r.Read<int32_t>("i32 value"));
      out.v = int64_t{x};
      break;
    }
    case GgufValueType::kInt64: {
      FAK_ASSIGN_OR_RETURN(int64_t x, r.Read<int64_t>("i64 value"));
      out.v = x;
      break;
    }
    case GgufValueType::kFloat32: {
      FAK_ASSIGN_OR_RETURN(float x, r.Read<float>("f32 value"));
      out.v = double{x};
      break;
    }
    case GgufValueType::kFloat64: {
      FAK_ASSIGN_OR_RETURN(double x, r.Read<double>("f64 value"));
      out.v = x;
      break;
    }
    case GgufValueType::kBool: {
      const size_t at = r.offset();
      FAK_ASSIGN_OR_RETURN(uint8_t x, r.Read<uint8_t>("bool value"));
      if (x > 1)
        return Corrupt("{}: offset {}: key '{}': bool value {} is neither 0 nor 1", r.source(), at, key, x);
      out.v = x == 1;
      break;
    }
    case GgufValueType::kString: {
      FAK_ASSIGN_OR_RETURN(std::string s, ReadString(r, "string value"));
      out.v = std::move(s);
      break;
    }
    case GgufValueType::kArray: return ReadArray(r, key, depth);
  }
  return out;
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string_view GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "u8";
    case GgufValueType::kInt8: return "i8";
    case GgufValueType::kUint16: return "u16";
    case GgufValueType::kInt16: return "i16";
    case GgufValueType::kUint32: return "u32";
    case GgufValueType::kInt32: return "i32";
    case GgufValueType::kFloat32: return "f32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "u64";
    case GgufValueType::kInt64: return "i64";
    case GgufValueType::kFloat64: return "f64";
  }
  return "?";
}

std::optional<uint64_t> GgufValue::AsUint() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v); i && *i >= 0) return static_cast<uint64_t>(*i);
  return std::nullopt;
}
std::optional<int64_t> GgufValue::AsInt() const {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v); u && *u <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}
std::optional<double> GgufValue::AsFloat() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}
std::optional<bool> GgufValue::AsBool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::nullopt;
}
const std::string* GgufValue::AsString() const { return std::get_if<std::string>(&v); }
const GgufArray* GgufValue::AsArray() const {
  const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v);
  return a ? a->get() : nullptr;
}

Result<GgufFile> GgufFile::Open(const std::string& path, GgufParseOptions options) {
  FAK_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path, options.map));
  GgufFile f;
  f.source_ = path;
  auto bytes = map.bytes();
  f.map_ = std::move(map);
  return ParseImpl(std::move(f), bytes);
}

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes, std::string source) {
  GgufFile f;
  f.source_ = std::move(source);
  return ParseImpl(std::move(f), bytes);
}

Result<GgufFile> GgufFile::ParseImpl(GgufFile f, std::span<const uint8_t> bytes) {
  ByteReader r(bytes, f.source_);
  f.size_ = bytes.size();
  FAK_ASSIGN_OR_RETURN(uint32_t magic, r.Read<uint32_t>("magic"));
  if (magic != kMagic) {
    char m[5] = {};
    std::memcpy(m, &magic, 4);
    for (char& c : m)
      if (c != 0 && (c < 32 || c > 126)) c = '?';
    return Corrupt("{}: offset 0: bad magic '{}' (not a GGUF file)", f.source_, std::string(m, 4));
  }
  FAK_ASSIGN_OR_RETURN(f.version_, r.Read<uint32_t>("version"));
  if (f.version_ != 2 && f.version_ != 3) {
    return Unsupported("{}: offset 4: GGUF version {} (fak reads versions 2 and 3)", f.source_, f.version_);
  }
  FAK_ASSIGN_OR_RETURN(uint64_t n_tensors, r.Read<uint64_t>("tensor count"));
  FAK_ASSIGN_OR_RETURN(uint64_t n_kv, r.Read<uint64_t>("metadata count"));
  // Each metadata entry takes at least 8+4+1 bytes and each tensor info at least 8+4+4+8 bytes.
  if (n_kv > r.remaining() / 13) {
    return Corrupt("{}: offset 16: metadata count {} cannot fit in the {} bytes left", f.source_, n_kv,
                   r.remaining());
  }
  if (n_tensors > r.remaining() / 24) {
    return Corrupt("{}: offset 8: tensor count {} cannot fit in the {} bytes left", f.source_, n_tensors,
                   r.remaining());
  }

  f.kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = r.offset();
    FAK_ASSIGN_OR_RETURN(std::string key, ReadString(r, "metadata key"));
    FAK_ASSIGN_OR_RETURN(uint32_t type, r.Read<uint32_t>("metadata value type"));
    if (!IsKnownValueType(type)) {
      return Corrupt("{}: offset {}: key '{}': unknown value type {}", f.source_, at, key, type);
    }
    FAK_ASSIGN_OR_RETURN(GgufValue value, ReadValue(r, static_cast<GgufValueType>(type), key, 0));
    if (f.kv_index_.count(key) != 0) {
      return Corrupt("{}: offset {}: duplicate metadata key '{}'", f.source_, at, key);
    }
    f.kv_index_.emplace(key, f.kv_.size());
    f.kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = f.Find("general.alignment")) {
    auto al = a->AsUint();
    if (!al || *al == 0 || (*al & (*al - 1)) != 0 || *al > (1u << 20)) {
      return Corrupt("{}: general.alignment must be a power of two up to 1 MiB", f.source_);
    }
    f.alignment_ = *al;
  }

  f.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = r.offset();
    GgufTensorInfo t;
    FAK_ASSIGN_OR_RETURN(t.name, ReadString(r, "tensor name"));
    FAK_ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>("tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Corrupt("{}: offset {}: tensor '{}': {} dimensions (want 1 to {})", f.source_, at, t.name,
                     n_dims, kMaxDims);
    }
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      FAK_ASSIGN_OR_RETURN(uint64_t dim, r.Read<uint64_t>("tensor dimension"));
      if (dim == 0 || dim > (uint64_t{1} << 40) || n > UINT64_MAX / dim) {
        return Corrupt("{}: offset {}: tensor '{}': dimension {} = {} is zero or overflows", f.source_, at,
                       t.name, d, dim);
      }
      n *= dim;
      t.shape.push_back(dim);
    }
    t.n_elements = n;
    FAK_ASSIGN_OR_RETURN(uint32_t type, r.Read<uint32_t>("tensor type"));
    auto traits = GetGgmlTypeTraits(type);
    if (!traits)
      return Corrupt("{}: offset {}: tensor '{}': unknown ggml type {}", f.source_, at, t.name, type);
    t.type = traits->type;
    if (t.shape[0] % traits->block_size != 0) {
      return Corrupt("{}: offset {}: tensor '{}': row length {} is not a multiple of {}'s block size {}",
                     f.source_, at, t.name, t.shape[0], traits->name, traits->block_size);
    }
    auto bytes_total = GgmlRowBytes(t.type, n);
    if (!bytes_total) return Corrupt("{}: offset {}: tensor '{}': size overflows", f.source_, at, t.name);
    t.n_bytes = *bytes_total;
    FAK_ASSIGN_OR_RETURN(t.offset, r.Read<uint64_t>("tensor data offset"));
    if (t.offset % f.alignment_ != 0) {
      return Corrupt("{}: offset {}: tensor '{}': data offset {} is not aligned to {}", f.source_, at, t.name,
                     t.offset, f.alignment_);
    }
    if (f.tensor_index_.count(t.name) != 0) {
      return Corrupt("{}: offset {}: duplicate tensor name '{}'", f.source_, at, t.name);
    }
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  f.data_offset_ = AlignUp(r.offset(), f.alignment_);
  if (n_tensors > 0 && f.data_offset_ > bytes.size()) {
    return Corrupt("{}: offset {}: file ends before the tensor data section at {}", f.source_, r.offset(),
                   f.data_offset_);
  }
  const uint64_t data_size = bytes.size() > f.data_offset_ ? bytes.size() - f.data_offset_ : 0;
  for (auto& t : f.tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return Corrupt("{}: tensor '{}': data [{}, {}) past the end of the file ({} bytes of tensor data)",
                     f.source_, t.name, f.data_offset_ + t.offset, f.data_offset_ + t.offset + t.n_bytes,
                     data_size);
    }
    t.data = bytes.data() + f.data_offset_ + t.offset;
  }
  // Tensors may not overlap: each byte of the data section belongs to at most one tensor (a tensor
  // retyped to a larger format would otherwise read its neighbour's bytes as its own).
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (by_offset[i]->offset < prev->offset + prev->n_bytes) {
      return Corrupt("{}: tensor '{}' (data [{}, {})) overlaps tensor '{}' (data from {})", f.source_,
                     prev->name, f.data_offset_ + prev->offset, f.data_offset_ + prev->offset + prev->n_bytes,
                     by_offset[i]->name, f.data_offset_ + by_offset[i]->offset);
    }
  }
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound("{}: missing metadata key '{}'", source_, key);
  auto u = v->AsUint();
  if (!u)
    return Corrupt("{}: metadata key '{}' is a {}, want an unsigned integer", source_, key,
                   GgufValueTypeName(v->type));
  return *u;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound("{}: missing metadata key '{}'", source_, key);
  auto d = v->AsFloat();
  if (!d)
    return Corrupt("{}: metadata key '{}' is a {}, want a number", source_, key, GgufValueTypeName(v->type));
  return *d;
}

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound("{}: missing metadata key '{}'", source_, key);
  const std::string* s = v->AsString();
  if (s == nullptr)
    return Corrupt("{}: metadata key '{}' is a {}, want a string", source_, key, GgufValueTypeName(v->type));
  return *s;
}

Result<const GgufArray*> GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound("{}: missing metadata key '{}'", source_, key);
  const GgufArray* a = v->AsArray();
  if (a == nullptr)
    return Corrupt("{}: metadata key '{}' is a {}, want an array", source_, key, GgufValueTypeName(v->type));
  return a;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace fak
