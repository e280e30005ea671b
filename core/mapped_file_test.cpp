#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fak {
namespace {

std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("fak_core_") + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(MappedFile, MapsContents) {
  std::string path = TempPath("map.bin");
  { std::ofstream(path, std::ios::binary) << "hello mapped world"; }
  auto f = MappedFile::Open(path, MapOptions{.huge_pages = true, .will_need = true});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), 18u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "hello mapped world");
  MappedFile moved = std::move(f.value());
  EXPECT_EQ(moved.size(), 18u);
  std::remove(path.c_str());
}

TEST(MappedFile, EmptyFileIsEmptyMapping) {
  std::string path = TempPath("empty.bin");
  { std::ofstream out(path, std::ios::binary); }
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 0u);
  std::remove(path.c_str());
}

TEST(MappedFile, MissingFileNamesPath) {
  auto f = MappedFile::Open("/nonexistent/fak/x.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
  EXPECT_NE(f.status().message().find("/nonexistent/fak/x.gguf"), std::string::npos);
}

TEST(MappedFile, DirectoryIsRejected) {
  auto f = MappedFile::Open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
}

// Text inputs are capped before anything is allocated (hardening item 5): a sparse file one byte past
// the cap is refused by its size, naming the cap; the cap itself is exact.
TEST(ReadFileToString, RefusesFilesPastTheCapBeforeReading) {
  std::string path = TempPath("big.txt");
  { std::ofstream out(path, std::ios::binary); }
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxTextFileBytes) + 1), 0);
  auto big = ReadFileToString(path);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(big.status().message().find("more than the 256 MiB a text input may have"), std::string::npos)
      << big.status().ToString();
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << "hello"; }
  EXPECT_FALSE(ReadFileToString(path, 4).ok());
  auto exact = ReadFileToString(path, 5);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(*exact, "hello");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fak
