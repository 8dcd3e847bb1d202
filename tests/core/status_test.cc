#include "edgesgd/core/status.h"

#include <gtest/gtest.h>

#include "edgesgd/core/result.h"

namespace edgesgd {
namespace {

Status FailsWith(StatusCode code) { return Status(code); }

Status PropagatesTry(StatusCode code, bool& reached_end) {
  EDGESGD_TRY(FailsWith(code));
  reached_end = true;
  return Status::Ok();
}

Result<int> Half(int value) {
  if (value % 2 != 0) return Status::InvalidArgument();
  return value / 2;
}

Status Quarter(int value, int& out) {
  EDGESGD_TRY_ASSIGN(const int half, Half(value));
  EDGESGD_TRY_ASSIGN(out, Half(half));
  return Status::Ok();
}

TEST(StatusTest, DefaultsToOkAndStaysTwoWords) {
  static_assert(sizeof(Status) <= 2 * sizeof(void*));
  constexpr Status status;
  static_assert(status.ok());
  EXPECT_STREQ(Status::DataLoss().str(), "DATA_LOSS");
  EXPECT_STREQ(Status::Ok().str(), "OK");
  EXPECT_STREQ(Status::Ok().reason(), "ok");
}

TEST(StatusTest, CarriesTheReasonGivenWhereTheFailureWasFound) {
  constexpr Status refused = Status::InvalidArgument("k ratio must be in (0, 1]");
  static_assert(!refused.ok() && refused.has_reason());
  EXPECT_STREQ(refused.reason(), "k ratio must be in (0, 1]");
  // Without a text the reason is the code's name; equality compares codes only.
  EXPECT_STREQ(Status::OutOfRange().reason(), "OUT_OF_RANGE");
  EXPECT_EQ(refused, Status::InvalidArgument());
  EXPECT_NE(refused, Status::OutOfRange("k ratio must be in (0, 1]"));
}

Status RefusesWithReason() { return Status::DataLoss("frame is truncated"); }

TEST(StatusTest, TryPropagatesTheReason) {
  const auto caller = []() -> Status {
    EDGESGD_TRY(RefusesWithReason());
    return Status::Ok();
  };
  EXPECT_STREQ(caller().reason(), "frame is truncated");
}

TEST(StatusTest, TryReturnsEarlyOnError) {
  bool reached_end = false;
  EXPECT_EQ(PropagatesTry(StatusCode::kOutOfRange, reached_end), Status::OutOfRange());
  EXPECT_FALSE(reached_end);
  EXPECT_TRUE(PropagatesTry(StatusCode::kOk, reached_end).ok());
  EXPECT_TRUE(reached_end);
}

TEST(ResultTest, TryAssignUnwrapsOrPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(12, out).ok());
  EXPECT_EQ(out, 3);
  EXPECT_EQ(Quarter(6, out), Status::InvalidArgument());
  EXPECT_EQ(Quarter(7, out), Status::InvalidArgument());
}

TEST(ResultDeathTest, ValueOfErrorIsFatal) {
  EXPECT_DEATH((void)Half(3).value(), "CHECK failed");
}

}  // namespace
}  // namespace edgesgd
