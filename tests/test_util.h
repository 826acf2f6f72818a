// Assertions shared by the tests: a message contains a part; the message of the exception a call throws.
#pragma once
#include <gtest/gtest.h>

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
