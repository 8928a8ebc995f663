// expectInvalid(f, arg): f() must throw boostcomm::Error of category
// kInvalidArgument whose message names `arg` (an option, field or file).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "boostcomm/error.h"

namespace boostcomm::testing {

template <typename F>
void expectInvalid(F&& f, const std::string& arg) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << arg;
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(arg), std::string::npos) << e.what();
  }
}

}  // namespace boostcomm::testing
