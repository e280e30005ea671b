#include "formats/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <set>

namespace fak {
namespace {

class FileOut {
 public:
  explicit FileOut(std::FILE* f) : f_(f) {}
  ~FileOut() {
    if (f_ != nullptr) std::fclose(f_);
  }
  bool Put(const void* p, size_t n) {
    ok_ = ok_ && std::fwrite(p, 1, n, f_) == n;
    pos_ += n;
    return ok_;
  }
  template <typename T>
  bool Pod(T v) {
    return Put(&v, sizeof(v));
  }
  bool Str(const std::string& s) { return Pod<uint64_t>(s.size()) && Put(s.data(), s.size()); }
  bool Pad(uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    while (ok_ && pos_ % alignment != 0) {
      const uint64_t n = std::min<uint64_t>(sizeof(zeros), alignment - pos_ % alignment);
      Put(zeros, n);
    }
    return ok_;
  }
  bool Close() {
    bool ok = ok_ && std::fflush(f_) == 0;
    ok = (std::fclose(f_) == 0) && ok;
    f_ = nullptr;
    return ok;
  }
  uint64_t pos() const { return pos_; }

 private:
  std::FILE* f_;
  uint64_t pos_ = 0;
  bool ok_ = true;
};

bool WriteValue(FileOut& out, const GgufValue& v);

bool WriteScalar(FileOut& out, GgufValueType type, const GgufValue& v) {
  switch (type) {
    case GgufValueType::kUint8: return out.Pod<uint8_t>(static_cast<uint8_t>(v.AsUint().value_or(0)));
    case GgufValueType::kUint16: return out.Pod<uint16_t>(static_cast<uint16_t>(v.AsUint().value_or(0)));
    case GgufValueType::kUint32: return out.Pod<uint32_t>(static_cast<uint32_t>(v.AsUint().value_or(0)));
    case GgufValueType::kUint64: return out.Pod<uint64_t>(v.AsUint().value_or(0));
    case GgufValueType::kInt8: return out.Pod<int8_t>(static_cast<int8_t>(v.AsInt().value_or(0)));
    case GgufValueType::kInt16: return out.Pod<int16_t>(static_cast<int16_t>(v.AsInt().value_or(0)));
    case GgufValueType::kInt32: return out.Pod<int32_t>(static_cast<int32_t>(v.AsInt().value_or(0)));
    case GgufValueType::kInt64: return out.Pod<int64_t>(v.AsInt().value_or(0));
    case GgufValueType::kFloat32: return out.Pod<float>(static_cast<float>(v.AsFloat().value_or(0)));
    case GgufValueType::kFloat64: return out.Pod<double>(v.AsFloat().value_or(0));
    case GgufValueType::kBool: return out.Pod<uint8_t>(v.AsBool().value_or(false) ? 1 : 0);
    case GgufValueType::kString: return out.Str(v.AsString() ? *v.AsString() : std::string());
    case GgufValueType::kArray: {
      const GgufArray* a = v.AsArray();
      if (a == nullptr) return out.Pod<uint32_t>(0) && out.Pod<uint64_t>(0);
      if (!out.Pod<uint32_t>(static_cast<uint32_t>(a->element_type)) ||
          !out.Pod<uint64_t>(a->values.size())) {
        return false;
      }
      for (const auto& e : a->values) {
        if (!WriteScalar(out, a->element_type, e)) return false;
      }
      return true;
    }
  }
  return false;
}

bool WriteValue(FileOut& out, const GgufValue& v) {
  return out.Pod<uint32_t>(static_cast<uint32_t>(v.type)) && WriteScalar(out, v.type, v);
}

template <typename T, typename Fn>
GgufValue MakeArray(GgufValueType et, const std::vector<T>& xs, Fn&& to_variant) {
  auto arr = std::make_shared<GgufArray>();
  arr->element_type = et;
  arr->values.reserve(xs.size());
  for (const auto& x : xs) {
    GgufValue e;
    e.type = et;
    e.v = to_variant(x);
    arr->values.push_back(std::move(e));
  }
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.v = std::move(arr);
  return v;
}

}  // namespace

void GgufWriter::SetValue(std::string key, GgufValue v) {
  for (auto& [k, old] : kv_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(v));
}

void GgufWriter::SetUint32(std::string key, uint32_t v) {
  SetValue(std::move(key), {GgufValueType::kUint32, uint64_t{v}});
}
void GgufWriter::SetUint64(std::string key, uint64_t v) {
  SetValue(std::move(key), {GgufValueType::kUint64, v});
}
void GgufWriter::SetInt32(std::string key, int32_t v) {
  SetValue(std::move(key), {GgufValueType::kInt32, int64_t{v}});
}
void GgufWriter::SetFloat32(std::string key, float v) {
  SetValue(std::move(key), {GgufValueType::kFloat32, double{v}});
}
void GgufWriter::SetBool(std::string key, bool v) { SetValue(std::move(key), {GgufValueType::kBool, v}); }
void GgufWriter::SetString(std::string key, std::string v) {
  SetValue(std::move(key), {GgufValueType::kString, std::move(v)});
}
void GgufWriter::SetStringArray(std::string key, std::vector<std::string> v) {
  SetValue(std::move(key), MakeArray(GgufValueType::kString, v, [](const std::string& s) { return s; }));
}
void GgufWriter::SetFloat32Array(std::string key, std::vector<float> v) {
  SetValue(std::move(key), MakeArray(GgufValueType::kFloat32, v, [](float x) { return double{x}; }));
}
void GgufWriter::SetInt32Array(std::string key, std::vector<int32_t> v) {
  SetValue(std::move(key), MakeArray(GgufValueType::kInt32, v, [](int32_t x) { return int64_t{x}; }));
}

Status GgufWriter::AddTensor(std::string name, std::vector<uint64_t> shape, GgmlType type, Producer produce) {
  auto traits = GetGgmlTypeTraits(type);
  if (!traits) return InvalidArgument("tensor '{}': unknown ggml type {}", name, static_cast<uint32_t>(type));
  if (shape.empty() || shape.size() > 4)
    return InvalidArgument("tensor '{}': {} dimensions", name, shape.size());
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d == 0) return InvalidArgument("tensor '{}': zero dimension", name);
    n *= d;
  }
  if (shape[0] % traits->block_size != 0) {
    return InvalidArgument("tensor '{}': row length {} is not a multiple of {}'s block size {}", name,
                           shape[0], traits->name, traits->block_size);
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return InvalidArgument("duplicate tensor name '{}'", name);
  }
  tensors_.push_back(
      Tensor{std::move(name), std::move(shape), type, *GgmlRowBytes(type, n), std::move(produce)});
  return Status::Ok();
}

Status GgufWriter::AddTensor(std::string name, std::vector<uint64_t> shape, GgmlType type,
                             std::span<const uint8_t> bytes) {
  const std::string n = name;
  FAK_RETURN_IF_ERROR(AddTensor(std::move(name), std::move(shape), type, [bytes, n](std::span<uint8_t> out) {
    if (out.size() != bytes.size()) {
      return InvalidArgument("tensor '{}': {} bytes given, its shape and type need {}", n, bytes.size(),
                             out.size());
    }
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return Status::Ok();
  }));
  return Status::Ok();
}

namespace {

const char* FileKind(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// The output and its temporary may be regular files or absent: a device, FIFO, directory or symbolic
// link is never replaced or written through.
Status CheckReplaceable(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return Status::Ok();
  return InvalidArgument("{}: refusing to write the output there: it is {}", path, FileKind(st.st_mode));
}

}  // namespace

Status GgufWriter::Write(const std::string& path) {
  const std::string tmp = path + ".tmp";
  FAK_RETURN_IF_ERROR(CheckReplaceable(path));
  FAK_RETURN_IF_ERROR(CheckReplaceable(tmp));
  std::remove(tmp.c_str());  // a regular file left by an interrupted run
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("{}: cannot create: {}", tmp, std::strerror(errno));
  std::FILE* f = fdopen(fd, "wb");
  if (f == nullptr) {
    close(fd);
    std::remove(tmp.c_str());
    return IoError("{}: cannot create: {}", tmp, std::strerror(errno));
  }
  FileOut out(f);
  auto fail = [&](Status s) {
    out.Close();
    std::remove(tmp.c_str());
    return s;
  };

  // general.alignment is written when it differs from the default, so readers find the data.
  if (alignment_ != 32) SetUint32("general.alignment", static_cast<uint32_t>(alignment_));
  out.Pod<uint32_t>(0x46554747);
  out.Pod<uint32_t>(3);
  out.Pod<uint64_t>(tensors_.size());
  out.Pod<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    out.Str(k);
    WriteValue(out, v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.Str(t.name);
    out.Pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) out.Pod<uint64_t>(d);
    out.Pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.Pod<uint64_t>(offset);
    offset += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  if (!out.Pad(alignment_)) return fail(IoError("{}: write failed: {}", tmp, std::strerror(errno)));
  // Tensor i is produced while tensor i - 1 is written by another thread, in two buffers: a model's
  // conversion otherwise waits for the disk after every tensor (a 0.5B synthesis on two cores spent 1.6
  // of its 4.1 s writing). A write reports its errno, 0 when it succeeded.
  std::vector<uint8_t> bufs[2];
  std::future<int> writing;
  auto written = [&]() { return writing.valid() ? writing.get() : 0; };
  for (size_t i = 0; i < tensors_.size(); ++i) {
    Tensor& t = tensors_[i];
    std::vector<uint8_t>& buf = bufs[i % 2];  // its last write, two tensors ago, has been waited for
    buf.assign(t.n_bytes, 0);
    const Status s = t.produce(std::span<uint8_t>(buf));
    if (const int e = written(); e != 0) return fail(IoError("{}: write failed: {}", tmp, std::strerror(e)));
    if (!s.ok()) return fail(s.WithContext(fmt::format("writing {}", path)));
    writing = std::async(std::launch::async, [&out, &buf, alignment = alignment_] {
      return out.Put(buf.data(), buf.size()) && out.Pad(alignment) ? 0 : (errno != 0 ? errno : EIO);
    });
  }
  if (const int e = written(); e != 0) return fail(IoError("{}: write failed: {}", tmp, std::strerror(e)));
  if (!out.Close()) {
    std::remove(tmp.c_str());
    return IoError("{}: write failed: {}", tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IoError("{}: cannot rename to {}: {}", tmp, path, std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace fak
