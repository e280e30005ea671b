#include "core/npy.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

namespace fak {
namespace {

namespace fs = std::filesystem;

fs::path Temp(const char* name) {
  return fs::temp_directory_path() / (std::string("fak_npy_") + std::to_string(getpid()) + "_" + name);
}

// Rows written one at a time read back as one (rows, cols) array; the header's row count is the
// number appended.
TEST(NpyRowWriter, StreamsRowsAndWritesTheCountLast) {
  const fs::path p = Temp("rows.npy");
  auto w = NpyRowWriter::Create(p.string(), 5);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<float> row(5);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) row[c] = static_cast<float>(r * 10 + c);
    ASSERT_TRUE((*w)->Append(row).ok());
  }
  EXPECT_FALSE((*w)->Append(std::vector<float>(4)).ok());  // wrong width
  ASSERT_TRUE((*w)->Finish().ok());
  auto a = ReadNpyF32(p.string());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(a->data[12], 22.0f);
  EXPECT_EQ(fs::file_size(p), 128u + 15 * 4);  // a 128-byte header, then the rows
  fs::remove(p);
}

// A writer that does not finish (generation failed or was stopped) leaves no partial file, and a path
// that cannot be created fails before any row, naming the reason.
TEST(NpyRowWriter, UnfinishedFilesAreRemovedAndBadPathsFailFirst) {
  const fs::path p = Temp("partial.npy");
  {
    auto w = NpyRowWriter::Create(p.string(), 2);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(std::vector<float>{1, 2}).ok());
    EXPECT_TRUE(fs::exists(p));
  }
  EXPECT_FALSE(fs::exists(p));
  auto bad = NpyRowWriter::Create("/nonexistent-dir/x.npy", 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("No such file or directory"), std::string::npos);
}

}  // namespace
}  // namespace fak
