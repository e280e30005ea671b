#include "formats/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

namespace fak {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DtypeInfo, 15> kDtypes = {{
    {SafetensorsDtype::kBool, "BOOL", 1},
    {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},
    {SafetensorsDtype::kU16, "U16", 2},
    {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kU32, "U32", 4},
    {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kU64, "U64", 8},
    {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kF8_E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kF8_E5M2, "F8_E5M2", 1},
}};

// Parses JSON without exceptions and reports duplicate keys of the top-level object, which
// nlohmann would otherwise silently merge.
Result<json> ParseHeaderJson(std::string_view text, const std::string& source) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt("{}: offset 8: header is not valid JSON", source);
  if (!duplicate.empty()) return Corrupt("{}: header: duplicate tensor name '{}'", source, duplicate);
  if (!j.is_object()) return Corrupt("{}: offset 8: header JSON is not an object", source);
  return j;
}

}  // namespace

std::optional<SafetensorsDtype> SafetensorsDtypeFromName(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}
std::string_view SafetensorsDtypeName(SafetensorsDtype dt) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dt) return d.name;
  }
  return "?";
}
size_t SafetensorsDtypeSize(SafetensorsDtype dt) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dt) return d.size;
  }
  return 1;
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path, MapOptions options) {
  FAK_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path, options));
  SafetensorsFile f;
  f.source_ = path;
  auto bytes = map.bytes();
  f.map_ = std::move(map);
  return ParseImpl(std::move(f), bytes);
}

Result<SafetensorsFile> SafetensorsFile::Parse(std::span<const uint8_t> bytes, std::string source) {
  SafetensorsFile f;
  f.source_ = std::move(source);
  return ParseImpl(std::move(f), bytes);
}

Result<SafetensorsFile> SafetensorsFile::ParseImpl(SafetensorsFile f, std::span<const uint8_t> bytes) {
  const std::string& src = f.source_;
  f.size_ = bytes.size();
  if (bytes.size() < 8)
    return Corrupt("{}: offset 0: truncated: {} bytes, need an 8-byte header length", src, bytes.size());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes) return Corrupt("{}: offset 0: header length {} exceeds the 100 MiB limit", src, n);
  if (n > bytes.size() - 8) {
    return Corrupt("{}: offset 0: header length {} runs past the end of the file ({} bytes)", src, n,
                   bytes.size());
  }
  f.header_size_ = n;
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n));
  FAK_ASSIGN_OR_RETURN(json header, ParseHeaderJson(text, src));
  const uint64_t data_size = bytes.size() - 8 - n;
  const uint8_t* data = bytes.data() + 8 + n;

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return Corrupt("{}: header: __metadata__ is not an object", src);
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string())
          return Corrupt("{}: header: __metadata__.{} is not a string", src, m.key());
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object()) return Corrupt("{}: header: tensor '{}' is not an object", src, name);
    SafetensorsTensor t;
    t.name = name;
    auto dt = e.find("dtype");
    if (dt == e.end() || !dt->is_string())
      return Corrupt("{}: header: tensor '{}': missing string field 'dtype'", src, name);
    auto dtype = SafetensorsDtypeFromName(dt->get<std::string>());
    if (!dtype)
      return Unsupported("{}: header: tensor '{}': unknown dtype '{}'", src, name, dt->get<std::string>());
    t.dtype = *dtype;
    auto sh = e.find("shape");
    if (sh == e.end() || !sh->is_array())
      return Corrupt("{}: header: tensor '{}': missing array field 'shape'", src, name);
    uint64_t count = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        return Corrupt("{}: header: tensor '{}': shape holds a non-integer", src, name);
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && count > UINT64_MAX / dim)
        return Corrupt("{}: header: tensor '{}': shape overflows", src, name);
      count *= dim;
      t.shape.push_back(dim);
    }
    t.n_elements = count;
    auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      return Corrupt("{}: header: tensor '{}': 'data_offsets' must be two unsigned integers", src, name);
    }
    const uint64_t b = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (end < b)
      return Corrupt("{}: header: tensor '{}': data_offsets [{}, {}) end before they begin", src, name, b,
                     end);
    if (end > data_size) {
      return Corrupt("{}: header: tensor '{}': data_offsets [{}, {}) past the end of the data ({} bytes)",
                     src, name, b, end, data_size);
    }
    const size_t es = SafetensorsDtypeSize(t.dtype);
    if (count > UINT64_MAX / es || end - b != count * es) {
      return Corrupt("{}: header: tensor '{}': {} bytes of data for {} {} elements", src, name, end - b,
                     count, SafetensorsDtypeName(t.dtype));
    }
    t.begin = b;
    t.n_bytes = end - b;
    t.data = data + b;
    f.tensors_.push_back(std::move(t));
  }
  // Tensors may not overlap (each byte of the data section belongs to at most one tensor).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (by_offset[i]->begin < prev->begin + prev->n_bytes) {
      return Corrupt("{}: header: tensors '{}' and '{}' overlap", src, prev->name, by_offset[i]->name);
    }
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& path, MapOptions options) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ck;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / "model.safetensors.index.json";
    const fs::path single = fs::path(path) / "model.safetensors";
    if (fs::exists(index, ec)) {
      FAK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index.string()));
      json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) return Corrupt("{}: not valid JSON", index.string());
      auto wm = j.find("weight_map");
      if (wm == j.end() || !wm->is_object())
        return Corrupt("{}: missing object 'weight_map'", index.string());
      std::set<std::string> seen;
      for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it.value().is_string())
          return Corrupt("{}: weight_map.{} is not a string", index.string(), it.key());
        const std::string shard = it.value().get<std::string>();
        if (shard.find('/') != std::string::npos || shard == "..") {
          return Corrupt("{}: weight_map.{}: shard '{}' is outside the checkpoint folder", index.string(),
                         it.key(), shard);
        }
        if (seen.insert(shard).second) files.push_back((fs::path(path) / shard).string());
      }
      FAK_RETURN_IF_ERROR([&]() -> Status {
        for (const auto& file : files) {
          FAK_ASSIGN_OR_RETURN(SafetensorsFile sf, SafetensorsFile::Open(file, options));
          ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(sf)));
        }
        // Every tensor the index names must be in the shard it names.
        for (auto it = wm->begin(); it != wm->end(); ++it) {
          const std::string shard = (fs::path(path) / it.value().get<std::string>()).string();
          bool found = false;
          for (const auto& s : ck.shards_) {
            if (s->path() == shard && s->Find(it.key()) != nullptr) found = true;
          }
          if (!found)
            return Corrupt("{}: tensor '{}' is not in its shard {}", index.string(), it.key(), shard);
        }
        return Status::Ok();
      }());
    } else if (fs::exists(single, ec)) {
      FAK_ASSIGN_OR_RETURN(SafetensorsFile sf, SafetensorsFile::Open(single.string(), options));
      ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(sf)));
    } else {
      return NotFound("{}: no model.safetensors or model.safetensors.index.json", path);
    }
  } else {
    FAK_ASSIGN_OR_RETURN(SafetensorsFile sf, SafetensorsFile::Open(path, options));
    ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(sf)));
  }
  for (const auto& s : ck.shards_) {
    for (const auto& t : s->tensors()) {
      if (!ck.index_.emplace(t.name, &t).second) {
        return Corrupt("{}: tensor '{}' appears in more than one shard", s->path(), t.name);
      }
    }
  }
  return ck;
}

std::vector<const SafetensorsTensor*> SafetensorsCheckpoint::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const auto& s : shards_) {
    for (const auto& t : s->tensors()) out.push_back(&t);
  }
  return out;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

}  // namespace fak
