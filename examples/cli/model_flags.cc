#include "cli/model_flags.h"

#include <cerrno>
#include <cstdlib>

#include "cli/flag_error.h"
#include "edgesgd/core/model/sequential.h"

namespace edgesgd::cli {

void AddModelFlags(CLI::App& command, ModelFlags& flags) {
  command.add_option("--model", flags.model,
                     "Train this network of layers (softmax cross-entropy on its last layer) "
                     "instead of softmax regression, e.g. "
                     "conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10. Layers: "
                     "dense:N, conv:FILTERS:K[:STRIDE[:same|valid]], dwconv:K[:STRIDE[:same|valid]], "
                     "maxpool:K[:STRIDE], avgpool:K[:STRIDE], relu, relu6, flatten (docs/models.md)");
  command.add_option("--input-shape", flags.input_shape,
                     "--model: one sample's shape HxWxC, row-major with channels last (default "
                     "28x28x1 for fashion-mnist, 1x1xFEATURES otherwise)");
}

bool ParseInputShape(const std::string& text, Shape& shape) {
  std::uint32_t sides[3] = {};
  const char* at = text.c_str();
  for (std::size_t i = 0; i < 3; ++i) {
    if (i > 0 && *at++ != 'x') return false;
    if (*at < '0' || *at > '9') return false;
    char* end = nullptr;
    errno = 0;
    const unsigned long long side = std::strtoull(at, &end, 10);
    if (errno != 0 || side == 0 || side > 0xFFFFFFFFull) return false;
    sides[i] = static_cast<std::uint32_t>(side);
    at = end;
  }
  if (*at != '\0') return false;
  shape = {sides[0], sides[1], sides[2]};
  return true;
}

HostResult<SequentialSpec> NetworkFor(const ModelFlags& flags, const std::string& data,
                                      std::size_t features, std::size_t classes) {
  Shape input{};
  if (!flags.input_shape.empty() && !ParseInputShape(flags.input_shape, input)) {
    return FlagError("--input-shape " + flags.input_shape +
                     ": expected HxWxC, three positive integers");
  }
  if (input.size() == 0) {
    input = data == "fashion-mnist" ? Shape{28, 28, 1}
                                    : Shape{1, 1, static_cast<std::uint32_t>(features)};
  }
  if (input.size() != features) {
    return FlagError("--input-shape " + std::to_string(input.height) + "x" +
                     std::to_string(input.width) + "x" + std::to_string(input.channels) +
                     " holds " + std::to_string(input.size()) +
                     " values, but the data's samples have " + std::to_string(features));
  }
  const Result<SequentialSpec> parsed = ParseSequentialSpec(flags.model, input, classes);
  if (!parsed.ok()) return HostError(parsed.status()).WithContext("--model " + flags.model);
  return *parsed;
}

}  // namespace edgesgd::cli
