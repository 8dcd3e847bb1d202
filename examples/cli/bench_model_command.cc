// `edgesgd bench model`: forward + backward samples per second of a network of layers (--model,
// docs/models.md) on one core, and of the same network in PyTorch on one CPU thread, measured in
// the same run so that their ratio is comparable on any machine.
//
// The PyTorch side is a short Python program this command writes to a temporary file and runs
// with python3 (Debian's python3-torch) in --torch-processes processes, keeping the best figures:
// PyTorch's training speed settles per process in one of two modes on some machines (about 12,000
// or 19,000 samples/s for the default network on the reference machine), and the comparison is
// with its faster one. Without python3-torch the edgesgd figures are still printed.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/model_flags.h"
#include "edgesgd/core/model/sequential.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/clock.h"

namespace edgesgd::cli {
namespace {

struct BenchModelOptions {
  std::string model = "conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10";
  std::string input_shape = "28x28x1";
  std::size_t classes = 10;
  std::size_t batch = 32;
  double seconds = 2.0;
  int repeats = 3;
  bool torch = true;
  int torch_processes = 5;
  std::string python = "/usr/bin/python3";  // Debian's, where python3-torch installs
  bool json = false;
};

// Samples per second of one timed phase: the best of `repeats` runs, each of as many batches as
// fill `seconds` (at least one).
struct Throughput {
  double train = 0;     // forward + backward (the mean loss and its gradient)
  double evaluate = 0;  // forward only (loss and accuracy)
};

template <typename Step>
double BestSamplesPerSecond(const BenchModelOptions& o, Step&& step) {
  step();  // warm-up: page in the parameters and scratch
  double best = 0;
  for (int r = 0; r < o.repeats; ++r) {
    const std::uint64_t start = platform::MonotonicNanos();
    std::size_t batches = 0;
    double elapsed = 0;
    do {
      step();
      ++batches;
      elapsed = static_cast<double>(platform::MonotonicNanos() - start) * 1e-9;
    } while (elapsed < o.seconds);
    best = std::max(best, static_cast<double>(batches * o.batch) / elapsed);
  }
  return best;
}

Throughput MeasureEdgesgd(const BenchModelOptions& o, const SequentialSpec& spec) {
  const std::size_t features = spec.features();
  std::vector<float> inputs(o.batch * features);
  std::vector<std::uint8_t> labels(o.batch);
  CounterRng rng(1, 0, 0, StreamId(RandomPurpose::kUser));
  for (float& value : inputs) value = rng.NextFloat();
  for (std::uint8_t& label : labels) label = static_cast<std::uint8_t>(rng.NextBelow(spec.classes));
  DatasetView batch;
  batch.features = inputs;
  batch.labels = labels;
  batch.num_samples = o.batch;
  batch.feature_dim = features;
  batch.num_classes = spec.classes;

  std::vector<float> params(ParameterCount(spec));
  std::vector<float> gradient(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  (void)InitSequentialParameters(spec, 1, params);
  Throughput figures;
  figures.train = BestSamplesPerSecond(o, [&] {
    (void)Sequential::LossAndGradient(spec, params, batch, gradient, scratch);
  });
  figures.evaluate = BestSamplesPerSecond(o, [&] {
    EvaluationSums sums;
    (void)Sequential::AddToEvaluation(spec, params, batch, scratch, sums);
  });
  return figures;
}

// The same network in PyTorch (NCHW, one thread), from the canonical spec text: conv layers with
// "same" padding get edgesgd's zero padding (the odd one at the bottom and right).
constexpr const char* kTorchProgram = R"PY(
import sys, time
import torch
from torch import nn

def build(spec, h, w, c, classes):
    layers = []
    for text in spec.split(","):
        f = text.split(":")
        kind = f[0]
        if kind in ("conv", "dwconv"):
            filters = int(f[1]) if kind == "conv" else c
            k, s, pad = (int(f[2]), int(f[3]), f[4]) if kind == "conv" else (int(f[1]), int(f[2]), f[3])
            if pad == "same":
                oh, ow = -(-h // s), -(-w // s)
                th, tw = max((oh - 1) * s + k - h, 0), max((ow - 1) * s + k - w, 0)
                layers.append(nn.ZeroPad2d((tw // 2, tw - tw // 2, th // 2, th - th // 2)))
                h, w = h + th, w + tw
            layers.append(nn.Conv2d(c, filters, k, stride=s, groups=(c if kind == "dwconv" else 1)))
            h, w, c = (h - k) // s + 1, (w - k) // s + 1, filters
        elif kind in ("maxpool", "avgpool"):
            k, s = int(f[1]), int(f[2])
            layers.append((nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d)(k, stride=s))
            h, w = (h - k) // s + 1, (w - k) // s + 1
        elif kind == "relu":
            layers.append(nn.ReLU())
        elif kind == "relu6":
            layers.append(nn.ReLU6())
        elif kind == "flatten":
            layers.append(nn.Flatten())
            h, w, c = 1, 1, h * w * c
        elif kind == "dense":
            layers.append(nn.Flatten())
            layers.append(nn.Linear(h * w * c, int(f[1])))
            h, w, c = 1, 1, int(f[1])
        else:
            raise SystemExit("unknown layer " + kind)
    return nn.Sequential(*layers)

def best(step, batch, seconds, repeats):
    step()
    top = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        batches = 0
        while True:
            step()
            batches += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        top = max(top, batches * batch / elapsed)
    return top

spec, h, w, c, classes, batch, seconds, repeats = sys.argv[1:9]
h, w, c, classes, batch, repeats = int(h), int(w), int(c), int(classes), int(batch), int(repeats)
seconds = float(seconds)
torch.set_num_threads(1)
torch.manual_seed(1)
net = build(spec, h, w, c, classes)
x = torch.rand(batch, c, h, w)
y = torch.randint(0, classes, (batch,))
loss_fn = nn.CrossEntropyLoss()

def train():
    net.zero_grad(set_to_none=False)
    loss_fn(net(x), y).backward()

def evaluate():
    with torch.no_grad():
        logits = net(x)
        loss_fn(logits, y)
        (logits.argmax(1) == y).sum()

print("torch", torch.__version__, best(train, batch, seconds, repeats),
      best(evaluate, batch, seconds, repeats))
)PY";

struct TorchFigures {
  bool measured = false;
  std::string version;
  std::string why_not;  // when not measured
  Throughput throughput;
};

// Runs the PyTorch program once; false with `why_not` set when it could not.
bool RunTorchProgram(const std::string& command, const std::string& python, TorchFigures& figures) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    figures.why_not = "cannot start " + python;
    return false;
  }
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  char version[64] = {};
  Throughput run;
  if (status != 0 ||
      std::sscanf(output.c_str(), "torch %63s %lf %lf", version, &run.train, &run.evaluate) != 3) {
    const std::size_t end = output.find_last_not_of("\n");
    const std::size_t line = output.rfind('\n', end);
    figures.why_not = python + " could not run it (install python3-torch): " +
                      output.substr(line == std::string::npos ? 0 : line + 1,
                                    end == std::string::npos ? 0 : end - line);
    return false;
  }
  figures.measured = true;
  figures.version = version;
  figures.throughput.train = std::max(figures.throughput.train, run.train);
  figures.throughput.evaluate = std::max(figures.throughput.evaluate, run.evaluate);
  return true;
}

// The best figures of o.torch_processes runs of the PyTorch program.
TorchFigures MeasureTorch(const BenchModelOptions& o, const SequentialSpec& spec,
                          const std::string& canonical) {
  TorchFigures result;
  char path[] = "/tmp/edgesgd_bench_torch_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) {
    result.why_not = "cannot create a temporary file for the PyTorch program";
    return result;
  }
  const std::size_t length = std::strlen(kTorchProgram);
  const bool written = ::write(fd, kTorchProgram, length) == static_cast<ssize_t>(length);
  ::close(fd);
  if (written) {
    const std::string command =
        o.python + " " + path + " " + canonical + " " + std::to_string(spec.input.height) + " " +
        std::to_string(spec.input.width) + " " + std::to_string(spec.input.channels) + " " +
        std::to_string(spec.classes) + " " + std::to_string(o.batch) + " " +
        std::to_string(o.seconds) + " " + std::to_string(o.repeats) + " 2>&1";
    for (int run = 0; run < o.torch_processes; ++run) {
      if (!RunTorchProgram(command, o.python, result)) {
        result.measured = false;
        break;
      }
    }
  } else {
    result.why_not = "cannot write the PyTorch program to a temporary file";
  }
  ::unlink(path);
  return result;
}

int RunBenchModel(const BenchModelOptions& o) {
  Shape input;
  if (!ParseInputShape(o.input_shape, input)) {
    std::fprintf(stderr, "edgesgd bench model: --input-shape %s: expected HxWxC\n",
                 o.input_shape.c_str());
    return 2;
  }
  const Result<SequentialSpec> spec = ParseSequentialSpec(o.model, input, o.classes);
  if (!spec.ok()) {
    std::fprintf(stderr, "edgesgd bench model: --model %s: %s\n", o.model.c_str(),
                 spec.status().reason());
    return 2;
  }
  std::array<char, kMaxSequentialSpecChars> text{};
  const std::string canonical(FormatSequentialSpec(*spec, text).value());
  const Throughput edgesgd = MeasureEdgesgd(o, *spec);
  TorchFigures torch;
  if (o.torch) torch = MeasureTorch(o, *spec, canonical);

  const auto ratio = [](double ours, double theirs) { return theirs > 0 ? ours / theirs : 0.0; };
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"parameters\": %zu, \"batch\": %zu, \"edgesgd\": "
                "{\"train_samples_per_s\": %.1f, \"evaluate_samples_per_s\": %.1f}",
                canonical.c_str(), ParameterCount(*spec), o.batch, edgesgd.train,
                edgesgd.evaluate);
    if (torch.measured) {
      std::printf(", \"torch\": {\"version\": \"%s\", \"train_samples_per_s\": %.1f, "
                  "\"evaluate_samples_per_s\": %.1f}, \"train_ratio\": %.3f, "
                  "\"evaluate_ratio\": %.3f",
                  torch.version.c_str(), torch.throughput.train, torch.throughput.evaluate,
                  ratio(edgesgd.train, torch.throughput.train),
                  ratio(edgesgd.evaluate, torch.throughput.evaluate));
    }
    std::printf("}\n");
    return 0;
  }
  std::printf("model %s: %zu parameters, input %ux%ux%u, batch %zu, one core\n", canonical.c_str(),
              ParameterCount(*spec), input.height, input.width, input.channels, o.batch);
  std::printf("%-26s %18s %18s\n", "", "train samples/s", "evaluate samples/s");
  std::printf("%-26s %18.0f %18.0f\n", "edgesgd", edgesgd.train, edgesgd.evaluate);
  if (torch.measured) {
    const std::string label = "PyTorch " + torch.version + " (1 thread)";
    std::printf("%-26s %18.0f %18.0f\n", label.c_str(), torch.throughput.train,
                torch.throughput.evaluate);
    std::printf("%-26s %17.2fx %17.2fx\n", "edgesgd / PyTorch",
                ratio(edgesgd.train, torch.throughput.train),
                ratio(edgesgd.evaluate, torch.throughput.evaluate));
  } else if (o.torch) {
    std::printf("PyTorch not measured: %s\n", torch.why_not.c_str());
  }
  return 0;
}

}  // namespace

void AddBenchModelCommand(CLI::App& bench, int& exit_code) {
  auto options = std::make_shared<BenchModelOptions>();
  CLI::App* model = bench.add_subcommand(
      "model",
      "Forward + backward samples per second of a network of layers on one core, beside the same "
      "network in PyTorch on one CPU thread (python3-torch) measured in the same run");
  AddConfigFlag(*model);
  model->add_option("--model", options->model, "The network (docs/models.md)")
      ->capture_default_str();
  model->add_option("--input-shape", options->input_shape, "One sample's shape HxWxC")
      ->capture_default_str();
  AddBoundedOption(*model, "--classes", options->classes, std::size_t{2}, std::size_t{256},
                   "Outputs of the last layer");
  AddBoundedOption(*model, "--batch", options->batch, std::size_t{1}, std::size_t{4096},
                   "Samples per forward + backward call");
  AddBoundedOption(*model, "--seconds", options->seconds, 0.01, 600.0, "Length of one timed run");
  AddBoundedOption(*model, "--repeats", options->repeats, 1, 100,
                   "Timed runs per figure; the best is reported");
  model->add_flag("!--no-torch", options->torch, "Measure edgesgd alone");
  AddBoundedOption(*model, "--torch-processes", options->torch_processes, 1, 20,
                   "PyTorch runs, each in a new process; the best figures are reported (its "
                   "speed can settle per process in a slower mode)");
  model->add_option("--python", options->python, "The Python interpreter that has torch (Debian's python3-torch)")
      ->capture_default_str();
  model->add_flag("--json", options->json, "Print one JSON object instead of a table");
  model->callback([options, &exit_code] { exit_code = RunBenchModel(*options); });
}

}  // namespace edgesgd::cli
