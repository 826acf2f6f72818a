// Shared by the tests: a message contains a part; the message of the exception a call throws; a
// fixture with a scratch folder of its own.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

#define EXPECT_HAS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "missing \"" << (part) << "\" in: " << (msg)

// The what() of the E that f() throws; a test failure if it throws nothing of that type.
template <typename E = rnntrain::DataError, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception of the right type";
  return "";
}

// A fixture with a scratch folder per test (rnntrain_<tag>_<pid>_<test>), removed afterwards.
class ScratchTest : public ::testing::Test {
 protected:
  explicit ScratchTest(const std::string& tag) : tag_(tag) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rnntrain_" + tag_ + "_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  std::filesystem::path dir_;

 private:
  std::string tag_;
};
