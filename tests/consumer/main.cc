// Encodes and decodes a vector with an installed edgesgd: proves the exported targets carry
// their include paths, compile definitions and link dependencies (core -> platform backend).
#include <array>
#include <cstdio>

#include "edgesgd/core/codec_registry.h"

int main() {
  const auto layout = edgesgd::TensorLayout::Single(8);
  if (!layout.ok()) return 1;
  const edgesgd::CodecParams params = edgesgd::SignParams{.scale = edgesgd::SignScale::kUnit};
  const edgesgd::CodecRegistry& codecs = edgesgd::AllCodecs();
  std::array<float, 8> input = {1, -2, 3, -4, 0, 6, -7, 8};
  std::array<std::uint32_t, 1> words{};
  std::array<float, 1> scales{};
  const edgesgd::PayloadSpans out{{}, {}, words, scales};
  if (!codecs.Encode(params, *layout, {}, input, out, {}).ok()) return 1;
  std::array<float, 8> decoded{};
  const edgesgd::PayloadView view({}, {}, words, scales);
  if (!codecs.DecodeAdd(params, *layout, {}, view, 1.0f, decoded, {}).ok()) return 1;
  for (std::size_t i = 0; i < input.size(); ++i) {
    if ((input[i] >= 0.0f) != (decoded[i] > 0.0f)) return 1;
  }
  std::printf("consumer: sign round trip ok (words = 0x%08x)\n", static_cast<unsigned>(words[0]));
  return 0;
}
