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

}  // namespace
}  // namespace fak
