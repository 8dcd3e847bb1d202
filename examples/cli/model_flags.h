#pragma once

// --model SPEC and --input-shape HxWxC: a network of layers (docs/models.md) in place of softmax
// regression, for every command that trains (simulate, server, worker, peer, train).

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "edgesgd/core/model/sequential_spec.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

struct ModelFlags {
  std::string model;        // the layer spec; empty: the task's own model
  std::string input_shape;  // HxWxC; empty: 28x28x1 for fashion-mnist, else 1x1xFEATURES
};

// Registers --model and --input-shape on `command`.
void AddModelFlags(CLI::App& command, ModelFlags& flags);

// "HxWxC": three positive integers below 2^32. False for anything else.
bool ParseInputShape(const std::string& text, Shape& shape);

// The network of `flags` for samples of `features` values from `data` (a --data value) and
// `classes` classes. Errors: a one-line message naming the flag (a bad or mismatched
// --input-shape, a spec the parser refuses, with its reason).
HostResult<SequentialSpec> NetworkFor(const ModelFlags& flags, const std::string& data,
                                      std::size_t features, std::size_t classes);

}  // namespace edgesgd::cli
