// HostResult: a value or a HostError whose message is the whole line for people, with context
// added as the error travels up.

#include "edgesgd/platform/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

namespace edgesgd {
namespace {

HostResult<int> Parse(const std::string& text) {
  if (text.empty()) return HostError(Status::InvalidArgument("empty"), "'' is not a number");
  return std::stoi(text);
}

HostResult<> Check(const std::string& text) {
  HostResult<int> parsed = Parse(text);
  if (!parsed.ok()) return std::move(parsed).error().WithContext("--rounds");
  return {};
}

HostResult<> CheckTwice(const std::string& first, const std::string& second) {
  EDGESGD_HOST_TRY(Check(first));
  EDGESGD_HOST_TRY(Check(second));
  return {};
}

TEST(HostResultTest, HoldsAValue) {
  HostResult<int> parsed = Parse("42");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), 42);
  EXPECT_EQ(*parsed, 42);
  EXPECT_EQ(parsed.status(), Status::Ok());
  EXPECT_EQ(parsed.message(), "");
}

TEST(HostResultTest, HoldsAnErrorWithItsStatusAndMessage) {
  const HostResult<int> parsed = Parse("");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status(), Status::InvalidArgument());
  EXPECT_STREQ(parsed.status().reason(), "empty");
  EXPECT_EQ(parsed.message(), "'' is not a number");
  EXPECT_EQ(parsed.error().message(), parsed.message());
}

TEST(HostResultTest, AnErrorWithoutMessageSaysItsReason) {
  const HostResult<> failed = HostError(Status::NotFound("no such peer"));
  EXPECT_EQ(failed.status(), Status::NotFound());
  EXPECT_EQ(failed.message(), "no such peer");
}

TEST(HostResultTest, ContextIsPrefixedAsTheErrorPropagates) {
  EXPECT_TRUE(Check("7").ok());
  const HostResult<> checked = Check("");
  EXPECT_EQ(checked.status(), Status::InvalidArgument());
  EXPECT_EQ(checked.message(), "--rounds: '' is not a number");
  EXPECT_EQ(HostResult<>(checked.error()).WithContext("reading run.conf").message(),
            "reading run.conf: --rounds: '' is not a number");
  EXPECT_TRUE(HostResult<>().WithContext("unused").ok());
}

TEST(HostResultTest, TryReturnsTheFirstError) {
  EXPECT_TRUE(CheckTwice("1", "2").ok());
  EXPECT_EQ(CheckTwice("1", "").message(), "--rounds: '' is not a number");
}

TEST(HostResultTest, MovesAValueThatCannotBeCopied) {
  HostResult<std::unique_ptr<int>> made = std::make_unique<int>(5);
  ASSERT_TRUE(made.ok());
  const std::unique_ptr<int> taken = std::move(made).value();
  EXPECT_EQ(*taken, 5);
}

}  // namespace
}  // namespace edgesgd
