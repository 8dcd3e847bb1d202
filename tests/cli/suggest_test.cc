// The spelling suggestions of mistyped flags, commands and config keys (cli/suggest.h): the edit
// distance counts a swap of neighbours as one edit, and only names within a third of the typed
// name's length are suggested, the nearest alone.

#include "cli/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace edgesgd::cli {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("k-ratio", "k-ratio"), 0u);
  EXPECT_EQ(EditDistance("k-ration", "k-ratio"), 1u);  // deletion
  EXPECT_EQ(EditDistance("simulat", "simulate"), 1u);  // insertion
  EXPECT_EQ(EditDistance("codex", "codec"), 1u);       // substitution
  EXPECT_EQ(EditDistance("rl", "lr"), 1u);             // swap of neighbours
  EXPECT_EQ(EditDistance("wrokers", "workers"), 1u);
  EXPECT_EQ(EditDistance("", "seed"), 4u);
  EXPECT_EQ(EditDistance("seed", ""), 4u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  // Optimal string alignment edits no character twice: "ca" -> "ac" -> "abc" is not allowed.
  EXPECT_EQ(EditDistance("ca", "abc"), 3u);
}

TEST(NearestNamesTest, SuggestsTheNearestNamesWithinAThirdOfTheTypedLength) {
  const std::vector<std::string> flags = {"k-ratio", "rounds", "workers", "lr", "seed", "speed"};
  EXPECT_EQ(NearestNames("k-ration", flags), std::vector<std::string>{"k-ratio"});
  EXPECT_EQ(NearestNames("rl", flags), std::vector<std::string>{"lr"});
  // "sed" is one edit from "seed" and two from "speed": the nearest alone.
  EXPECT_EQ(NearestNames("sed", flags), std::vector<std::string>{"seed"});
  // Ties are all suggested, in the order given.
  EXPECT_EQ(NearestNames("seeed", flags), (std::vector<std::string>{"seed", "speed"}));
  // Two edits in a 7-letter name are typos; three are another word.
  EXPECT_EQ(NearestNames("wrokres", flags), std::vector<std::string>{"workers"});
  EXPECT_EQ(NearestNames("wxrkxrx", flags), std::vector<std::string>{});
  // One edit in a 5-letter name, but not two.
  EXPECT_EQ(NearestNames("rouns", flags), std::vector<std::string>{"rounds"});
  EXPECT_EQ(NearestNames("ruons", flags), std::vector<std::string>{});
  EXPECT_EQ(NearestNames("frobnicate", flags), std::vector<std::string>{});
  // A name listed twice (a flag with two spellings) is suggested once.
  EXPECT_EQ(NearestNames("lrr", {"lr", "lr"}), std::vector<std::string>{"lr"});
}

TEST(JoinAlternativesTest, ListsNamesAsASentenceDoes) {
  EXPECT_EQ(JoinAlternatives({"--lr"}), "--lr");
  EXPECT_EQ(JoinAlternatives({"--seed", "--speed"}), "--seed or --speed");
  EXPECT_EQ(JoinAlternatives({"'a'", "'b'", "'c'"}), "'a', 'b' or 'c'");
}

}  // namespace
}  // namespace edgesgd::cli
