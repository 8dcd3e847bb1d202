#include "edgesgd/platform/data_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "platform/data_file_writers.h"

namespace edgesgd::platform {
namespace {

using data_files::Bytes;
using data_files::Gzip;
using data_files::LittleEndian;
using data_files::Npy;

Bytes Text(const std::string& text) { return Bytes(text.begin(), text.end()); }

// IDX images of `rows` x `cols` unsigned bytes, pixel i of the file = i % 256.
Bytes Images(std::uint32_t count, std::uint32_t rows = 2, std::uint32_t cols = 2) {
  return data_files::ImagesIdx(0x00000803, count, rows, cols, count);
}
Bytes Labels(const Bytes& labels) { return data_files::LabelsIdx(0x00000801, labels); }

// The features as a model sees them: float rows, bytes scaled as they are gathered.
std::vector<float> Floats(const LabeledData& data) {
  std::vector<float> floats(data.num_samples * data.feature_dim);
  std::vector<std::uint8_t> labels(data.num_samples);
  EXPECT_TRUE(GatherRows(data.View(), {}, {floats, labels, {}}).ok());
  return floats;
}

class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/edgesgd_data_file_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& path : written_) std::remove(path.c_str());
    ::rmdir(dir_.c_str());
  }

  // Writes `bytes` to `name` in the test's directory and returns its path.
  std::string Write(const std::string& name, const Bytes& bytes) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(data_files::WriteBytes(path, bytes)) << path;
    written_.push_back(path);
    return path;
  }

  static HostResult<LabeledData> Load(const std::string& spec,
                                      const DataReadOptions& options = {}) {
    const HostResult<DataFileSpec> parse = ParseDataFileSpec(spec);
    EXPECT_TRUE(parse.ok()) << parse.message();
    if (!parse.ok()) return parse.error();
    return LoadDataFile(*parse, options);
  }

  // The load fails with `status` and exactly `message`.
  static void ExpectFailure(const HostResult<LabeledData>& load, Status status,
                            const std::string& message) {
    EXPECT_EQ(load.status(), status) << load.message();
    EXPECT_EQ(load.message(), message);
  }

  std::string dir_;
  std::vector<std::string> written_;
};

// ---- Specs ----

TEST(DataFileSpecTest, SplitsFormatAndPaths) {
  HostResult<DataFileSpec> parse = ParseDataFileSpec("idx:/d/train-images-idx3-ubyte.gz");
  ASSERT_TRUE(parse.ok()) << parse.message();
  EXPECT_EQ(parse->format, "idx");
  EXPECT_EQ(parse->paths, std::vector<std::string>{"/d/train-images-idx3-ubyte.gz"});
  parse = ParseDataFileSpec("npy:x.npy,y.npy");
  ASSERT_TRUE(parse.ok()) << parse.message();
  EXPECT_EQ(parse->paths, (std::vector<std::string>{"x.npy", "y.npy"}));
  EXPECT_EQ(DataFileSyntax(), "idx:IMAGES[,LABELS], csv:PATH, npy:FEATURES,LABELS");
}

TEST(DataFileSpecTest, RefusesUnknownFormatsEmptyPathsAndWrongCounts) {
  EXPECT_EQ(ParseDataFileSpec("parquet:a").message(),
            "unknown data format in 'parquet:a' (" + DataFileSyntax() + ")");
  EXPECT_EQ(ParseDataFileSpec("mnist").status(), Status::InvalidArgument());
  EXPECT_EQ(ParseDataFileSpec("csv:").message(), "'csv:' has an empty path (csv:PATH)");
  EXPECT_EQ(ParseDataFileSpec("idx:a,").message(),
            "'idx:a,' has an empty path (idx:IMAGES[,LABELS])");
  EXPECT_EQ(ParseDataFileSpec("npy:x.npy").message(),
            "'npy:x.npy' gives 1 path, expected npy:FEATURES,LABELS");
  EXPECT_EQ(ParseDataFileSpec("csv:a,b").message(), "'csv:a,b' gives 2 paths, expected csv:PATH");
}

TEST_F(DataFileTest, RefusesMoreClassesThanLabelsHold) {
  const std::string path = Write("d.csv", Text("0,1\n"));
  DataReadOptions options;
  options.classes = kMaxDataClasses + 1;
  ExpectFailure(Load("csv:" + path, options), Status::InvalidArgument(),
                "at most 256 classes can be read");
}

// ---- IDX ----

TEST_F(DataFileTest, IdxLoadsBytesScaledToUnitRangeWithLabelsBeside) {
  const std::string images = Write("train-images-idx3-ubyte", Images(3));
  Write("train-labels-idx1-ubyte", Labels({2, 0, 1}));
  const HostResult<LabeledData> load = Load("idx:" + images);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 3u);
  EXPECT_EQ(load->feature_dim, 4u);
  EXPECT_EQ(load->num_classes, 3u);     // 1 + the largest label
  EXPECT_TRUE(load->features.empty());  // bytes stay bytes
  ASSERT_EQ(load->feature_bytes.size(), 12u);
  const std::vector<float> floats = Floats(load.value());
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(load->feature_bytes[i], i) << i;
    EXPECT_EQ(floats[i], static_cast<float>(i) / 255.0f) << i;
  }
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{2, 0, 1}));
  EXPECT_TRUE(ValidateDataset(load->View()).ok());
}

// The gzip tests read with zlib; a build without it (a cross sysroot that has none) refuses gzip
// files instead, which DataFileTest.GzipIsRefusedWithoutZlib checks.
#if EDGESGD_TEST_READS_GZIP
TEST_F(DataFileTest, IdxReadsGzipAndExplicitLabelsAndARowRange) {
  const std::string images = Write("pixels.gz", Gzip(Images(4)));
  const std::string labels = Write("classes", Labels({3, 1, 4, 1}));
  DataReadOptions options;
  options.first_row = 1;
  options.max_rows = 2;
  options.classes = 10;
  const HostResult<LabeledData> load = Load("idx:" + images + "," + labels, options);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 2u);
  EXPECT_EQ(load->num_classes, 10u);
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{1, 4}));
  EXPECT_EQ(Floats(load.value()).front(), 4.0f / 255.0f);  // sample 1 starts at pixel 4
  EXPECT_EQ(Floats(load.value()).back(), 11.0f / 255.0f);

  options.first_row = 4;
  ExpectFailure(Load("idx:" + images + "," + labels, options), Status::OutOfRange(),
                "no samples in " + images + " from row 4: it holds 4");
}
#else
TEST_F(DataFileTest, GzipIsRefusedWithoutZlib) {
  EXPECT_FALSE(GzipAvailable());
  const std::string images = Write("pixels.gz", Gzip(Images(4)));
  const std::string labels = Write("classes", Labels({3, 1, 4, 1}));
  ExpectFailure(
      Load("idx:" + images + "," + labels), Status::Unavailable(),
      "cannot read " + images + ": it is gzip-compressed and edgesgd was built without zlib");
  const std::string csv = Write("d.csv.gz", Gzip(Text("label,x\n4,0.5\n")));
  ExpectFailure(
      Load("csv:" + csv), Status::Unavailable(),
      "cannot read " + csv + ": it is gzip-compressed and edgesgd was built without zlib");
}
#endif

TEST_F(DataFileTest, IdxReadsBigEndianFloats) {
  Bytes images;
  data_files::PutBig32(images, 0x00000D02);  // float, 2 dimensions
  data_files::PutBig32(images, 2);
  data_files::PutBig32(images, 1);
  for (const float value : {0.5f, -3.25f})
    data_files::PutBig32(images, std::bit_cast<std::uint32_t>(value));
  const std::string path = Write("f-images-idx2-float", images);
  Write("f-labels-idx1-float", Labels({0, 1}));
  const HostResult<LabeledData> load = Load("idx:" + path);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->features, (std::vector<float>{0.5f, -3.25f}));
}

TEST_F(DataFileTest, IdxReportsBadMagicAndUnsupportedTypes) {
  const std::string labels = Write("l", Labels({0}));
  std::string images = Write("i", data_files::ImagesIdx(0x08030000, 1, 2, 2, 1));
  ExpectFailure(Load("idx:" + images + "," + labels), Status::DataLoss(),
                "corrupt: bad magic 0x08030000 in " + images +
                    " (IDX images begin 0x0000, a type byte and at least 2 dimensions)");
  images = Write("i1", data_files::ImagesIdx(0x00000801, 1, 2, 2, 1));
  EXPECT_EQ(Load("idx:" + images + "," + labels).status(), Status::DataLoss());
  images = Write("i2", data_files::ImagesIdx(0x00000B03, 1, 2, 2, 1));
  ExpectFailure(Load("idx:" + images + "," + labels), Status::InvalidArgument(),
                "unsupported IDX type 0x0b in " + images +
                    " (read: 0x08 unsigned byte, 0x0d float, 0x0e double)");
  images = Write("i3", Images(1));
  const std::string not_labels = Write("l2", Images(1));
  ExpectFailure(
      Load("idx:" + images + "," + not_labels), Status::DataLoss(),
      "corrupt: bad magic 0x00000803 in " + not_labels + " (expected 0x00000801 for IDX labels)");
}

TEST_F(DataFileTest, IdxReportsTruncationShapeMismatchAndTrailingData) {
  const std::string labels = Write("l", Labels({0, 1, 2}));
  Bytes short_images = Images(3);
  short_images.resize(short_images.size() - 5);
  std::string images = Write("i", short_images);
  ExpectFailure(Load("idx:" + images + "," + labels), Status::DataLoss(),
                "truncated: expected 12 bytes of pixels in " + images + ", got 7");
  images = Write("i2", Bytes{0, 0, 8, 3, 0, 0, 0, 3, 0});
  ExpectFailure(Load("idx:" + images + "," + labels), Status::DataLoss(),
                "truncated: " + images + " ends after 9 of 16 header bytes");
  images = Write("i3", Images(2));
  ExpectFailure(Load("idx:" + images + "," + labels), Status::DataLoss(),
                "shape mismatch: " + images + " holds 2 samples but " + labels + " holds 3 labels");
  Bytes long_images = Images(3);
  long_images.push_back(7);
  images = Write("i4", long_images);
  ExpectFailure(Load("idx:" + images + "," + labels), Status::DataLoss(),
                "corrupt: " + images + " has data after its 3 declared items");
  // A range that stops before the end does not read that far.
  DataReadOptions options;
  options.max_rows = 2;
  EXPECT_TRUE(Load("idx:" + images + "," + labels, options).ok());
  images = Write("i5", data_files::ImagesIdx(0x00000803, 0, 2, 2, 0));
  const std::string no_labels = Write("l5", Labels({}));
  ExpectFailure(Load("idx:" + images + "," + no_labels), Status::OutOfRange(),
                "no samples in " + images);
}

TEST_F(DataFileTest, IdxReportsLabelsOutOfRangeMissingFilesAndUnnamedLabels) {
  const std::string images = Write("train-images-idx3-ubyte", Images(3));
  const std::string labels = Write("l", Labels({1, 7, 2}));
  DataReadOptions options;
  options.classes = 5;
  ExpectFailure(Load("idx:" + images + "," + labels, options), Status::DataLoss(),
                "corrupt: label 7 of sample 1 in " + labels + " is outside 0-4");
  ExpectFailure(Load("idx:" + images), Status::NotFound(),
                "missing file " + dir_ + "/train-labels-idx1-ubyte: No such file or directory");
  ExpectFailure(Load("idx:" + labels), Status::InvalidArgument(),
                "cannot tell the labels file of " + labels +
                    " (its name has no 'images'): give idx:IMAGES,LABELS");
  ExpectFailure(Load("idx:" + dir_), Status::InvalidArgument(),
                "cannot tell the labels file of " + dir_ +
                    " (its name has no 'images'): give idx:IMAGES,LABELS");
  ExpectFailure(Load("idx:" + dir_ + "," + labels), Status::Unavailable(),
                "cannot read " + dir_ + ": not a regular file");
}

#if EDGESGD_TEST_READS_GZIP
TEST_F(DataFileTest, IdxReportsCorruptGzip) {
  const std::string labels = Write("l", Labels({0}));
  Bytes gz = Gzip(Images(1));
  gz[gz.size() - 6] ^= 0xFF;  // a CRC byte
  const std::string images = Write("i.gz", gz);
  const HostResult<LabeledData> load = Load("idx:" + images + "," + labels);
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "corrupt gzip data in " + images + ": incorrect data check");
}
#endif

// ---- CSV ----

TEST_F(DataFileTest, CsvSkipsAHeaderAndToleratesSpacingLineEndsAndAByteOrderMark) {
  const std::string path =
      Write("d.csv", Text("\xEF\xBB\xBFlabel, x, y\r\n2, 0.5, -1e-3\r\n\n  0 ,+4,5.0\n1.0,6,7"));
  const HostResult<LabeledData> load = Load("csv:" + path);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 3u);
  EXPECT_EQ(load->feature_dim, 2u);
  EXPECT_EQ(load->num_classes, 3u);
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{2, 0, 1}));
  EXPECT_EQ(load->features, (std::vector<float>{0.5f, -1e-3f, 4.0f, 5.0f, 6.0f, 7.0f}));
}

TEST_F(DataFileTest, CsvWithoutHeaderReadsARowRangeAcrossReadChunks) {
  // About 120 KB: lines are cut by the reader's 64 KiB reads.
  std::string text;
  for (int i = 0; i < 6000; ++i) {
    text += std::to_string(i % 10);
    text += ',';
    text += std::to_string(i);
    text += ",0.125,0.25\n";
  }
  const std::string path = Write("d.csv", Text(text));
  HostResult<LabeledData> load = Load("csv:" + path);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 6000u);
  EXPECT_EQ(load->features[3 * 4321], 4321.0f);
  DataReadOptions options;
  options.first_row = 5000;
  options.max_rows = 3;
  load = Load("csv:" + path, options);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 3u);
  EXPECT_EQ(load->features,
            (std::vector<float>{5000, 0.125f, 0.25f, 5001, 0.125f, 0.25f, 5002, 0.125f, 0.25f}));
  options.first_row = 6000;
  ExpectFailure(Load("csv:" + path, options), Status::OutOfRange(),
                "no samples in " + path + " from row 6000: it holds 6000");
}

TEST_F(DataFileTest, CsvReportsCellsThatAreNotNumbers) {
  std::string path = Write("a.csv", Text("label,x\n1,2\n3,abc\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path + " line 3, column 2: 'abc' is not a number");
  path = Write("b.csv", Text("1,2,\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path + " line 1, column 3 is empty");
  path = Write("c.csv", Text("1,2\nx,3\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path + " line 2, column 1: 'x' is not a number");
  path = Write("d.csv", Text("1,0x10\n"));
  EXPECT_EQ(Load("csv:" + path).status(), Status::DataLoss());
  // Text from the file keeps the message on one line and short.
  path = Write("e.csv", Text("1,a\x01\xff\rb\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path + " line 1, column 2: 'a\\x01\\xff\\x0db' is not a number");
  path = Write("f.csv", Text("1," + std::string(50, 'z') + "\n"));
  ExpectFailure(
      Load("csv:" + path), Status::DataLoss(),
      "corrupt: " + path + " line 1, column 2: '" + std::string(40, 'z') + "'... is not a number");
}

TEST_F(DataFileTest, CsvReportsLabelsOutOfRangeOrFractionalAndValuesNotFinite) {
  std::string path = Write("a.csv", Text("0,1\n256,1\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: label 256 of sample 1 in " + path + " is outside 0-255");
  path = Write("b.csv", Text("-1,1\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: label -1 of sample 0 in " + path + " is outside 0-255");
  path = Write("c.csv", Text("2.5,1\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path +
                    " line 1: label 2.5 is not a whole number (the label is read from the first "
                    "column)");
  path = Write("d.csv", Text("1,nan\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: value nan of sample 0 in " + path + " is not a finite float");
  path = Write("e.csv", Text("1,2\n1,1e39\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: value 1e39 of sample 1 in " + path + " is not a finite float");
  path = Write("f.csv", Text("1,1e-50\n"));  // below float's range: rounds to zero, a number
  const HostResult<LabeledData> tiny = Load("csv:" + path);
  ASSERT_TRUE(tiny.ok()) << tiny.message();
  EXPECT_EQ(tiny->features, std::vector<float>{0.0f});
}

TEST_F(DataFileTest, CsvReadsTheLabelFromTheLastColumnWhenAsked) {
  const std::string path = Write("d.csv", Text("x,y,label\n0.5,-1,2\n4,5.0,0\n"));
  DataReadOptions options;
  options.csv_label = CsvLabelColumn::kLast;
  HostResult<LabeledData> load = Load("csv:" + path, options);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 2u);
  EXPECT_EQ(load->feature_dim, 2u);
  EXPECT_EQ(load->num_classes, 3u);
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{2, 0}));
  EXPECT_EQ(load->features, (std::vector<float>{0.5f, -1.0f, 4.0f, 5.0f}));
  options.labels_only = true;
  load = Load("csv:" + path, options);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{2, 0}));
  EXPECT_TRUE(load->features.empty());
}

TEST_F(DataFileTest, CsvSaysWhichColumnALabelThatIsNotAWholeNumberWasReadFrom) {
  // Label-last data read label-first: the first feature is taken for a label.
  std::string path = Write("a.csv", Text("x,y,label\n-0.4416,1.5,1\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path +
                    " line 2: label -0.4416 is not a whole number (the label is read from the "
                    "first column)");
  path = Write("b.csv", Text("1,0.25\n"));
  DataReadOptions options;
  options.csv_label = CsvLabelColumn::kLast;
  ExpectFailure(Load("csv:" + path, options), Status::DataLoss(),
                "corrupt: " + path +
                    " line 1: label 0.25 is not a whole number (the label is read from the last "
                    "column)");
  path = Write("c.csv", Text("1,n/a\n"));
  ExpectFailure(Load("csv:" + path, options), Status::DataLoss(),
                "corrupt: " + path + " line 1, column 2: 'n/a' is not a number");
  EXPECT_EQ(CsvLabelColumnNote(CsvLabelColumn::kFirst),
            "(the label is read from the first column)");
}

TEST_F(DataFileTest, CsvReportsRaggedRowsSingleColumnsAndNoSamples) {
  std::string path = Write("a.csv", Text("label,x,y\n1,2\n"));
  ExpectFailure(Load("csv:" + path), Status::DataLoss(),
                "corrupt: " + path + " line 2: 2 cells, expected 3");
  path = Write("b.csv", Text("1\n2\n"));
  ExpectFailure(
      Load("csv:" + path), Status::DataLoss(),
      "corrupt: " + path + " line 1: a label and at least one feature are needed, found 1 cell");
  path = Write("c.csv", Text("label,x\n\n"));
  ExpectFailure(Load("csv:" + path), Status::OutOfRange(), "no samples in " + path);
  path = Write("d.csv", Text(""));
  ExpectFailure(Load("csv:" + path), Status::OutOfRange(), "no samples in " + path);
  ExpectFailure(Load("csv:" + dir_ + "/missing.csv"), Status::NotFound(),
                "missing file " + dir_ + "/missing.csv: No such file or directory");
}

#if EDGESGD_TEST_READS_GZIP
TEST_F(DataFileTest, CsvReadsGzip) {
  const std::string path = Write("d.csv.gz", Gzip(Text("label,x\n4,0.5\n")));
  const HostResult<LabeledData> load = Load("csv:" + path);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->labels, std::vector<std::uint8_t>{4});
  EXPECT_EQ(load->num_classes, 5u);
}
#endif

// ---- Picked rows and labels alone (a worker's shard) ----

class PickedRowsTest : public DataFileTest {
 protected:
  static constexpr std::uint32_t kRows = 600;

  // The same samples in every format: IDX bytes (15x15 images, so the reader's 64 KiB reads
  // end inside an image), gzip-compressed IDX when zlib is built in, float .npy and CSV.
  std::vector<std::string> Specs() {
    Bytes classes(kRows);
    std::vector<float> values(kRows * 3);
    std::string csv;
    for (std::uint32_t i = 0; i < kRows; ++i) {
      classes[i] = static_cast<std::uint8_t>(i % 7);
      csv += std::to_string(i % 7);
      for (std::uint32_t k = 0; k < 3; ++k) {
        values[i * 3 + k] = static_cast<float>(i) + 0.25f * static_cast<float>(k);
        csv += ',';
        csv += std::to_string(values[i * 3 + k]);
      }
      csv += "\n";
    }
    const std::string labels = Write("p-labels-idx1-ubyte", Labels(classes));
    std::vector<std::string> specs = {
        "idx:" + Write("p-images-idx3-ubyte", Images(kRows, 15, 15)) + "," + labels,
        "npy:" + Write("x.npy", Npy("<f4", "(600, 3)", LittleEndian(values))) + "," +
            Write("y.npy", Npy("|u1", "(600,)", classes)),
        "csv:" + Write("d.csv", Text(csv))};
    if (GzipAvailable()) {
      specs.push_back("idx:" + Write("p.gz", Gzip(Images(kRows, 15, 15))) + "," + labels);
    }
    return specs;
  }
};

TEST_F(PickedRowsTest, AreTheRowsOfAFullLoad) {
  const std::vector<std::uint32_t> rows = {0, 1, 290, 291, 292, 433, 599};
  for (const std::string& spec : Specs()) {
    const HostResult<LabeledData> full = Load(spec);
    ASSERT_TRUE(full.ok()) << full.message();
    DataReadOptions options;
    options.rows = rows;
    options.classes = full->num_classes;
    const HostResult<LabeledData> picked = Load(spec, options);
    ASSERT_TRUE(picked.ok()) << picked.message();
    ASSERT_EQ(picked->num_samples, rows.size()) << spec;
    EXPECT_EQ(picked->feature_dim, full->feature_dim) << spec;
    EXPECT_EQ(picked->feature_bytes.empty(), full->feature_bytes.empty()) << spec;
    const std::vector<float> all = Floats(full.value());
    const std::vector<float> some = Floats(picked.value());
    const std::size_t dim = full->feature_dim;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(picked->labels[i], full->labels[rows[i]]) << spec << " row " << rows[i];
      EXPECT_TRUE(std::equal(some.begin() + static_cast<std::ptrdiff_t>(i * dim),
                             some.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim),
                             all.begin() + static_cast<std::ptrdiff_t>(rows[i] * dim)))
          << spec << " row " << rows[i];
    }
    // Rows count from first_row.
    options.first_row = 290;
    options.rows = std::span(rows).subspan(2, 1);  // row 290 + 290
    const HostResult<LabeledData> shifted = Load(spec, options);
    ASSERT_TRUE(shifted.ok()) << shifted.message();
    EXPECT_EQ(shifted->labels, std::vector<std::uint8_t>{full->labels[580]}) << spec;
  }
}

TEST_F(PickedRowsTest, LabelsAloneKeepTheShapeButNoFeatures) {
  for (const std::string& spec : Specs()) {
    const HostResult<LabeledData> full = Load(spec);
    ASSERT_TRUE(full.ok()) << full.message();
    DataReadOptions options;
    options.labels_only = true;
    const HostResult<LabeledData> labels = Load(spec, options);
    ASSERT_TRUE(labels.ok()) << labels.message();
    EXPECT_EQ(labels->labels, full->labels) << spec;
    EXPECT_EQ(labels->num_samples, full->num_samples) << spec;
    EXPECT_EQ(labels->feature_dim, full->feature_dim) << spec;
    EXPECT_EQ(labels->num_classes, 7u) << spec;
    EXPECT_TRUE(labels->features.empty() && labels->feature_bytes.empty()) << spec;
  }
}

TEST_F(PickedRowsTest, MustAscendAndLieInTheRowsAskedFor) {
  for (const std::string& spec : Specs()) {
    const std::string path = ParseDataFileSpec(spec)->paths[0];
    DataReadOptions options;
    const std::vector<std::uint32_t> descending = {2, 1};
    options.rows = descending;
    ExpectFailure(Load(spec, options), Status::InvalidArgument(),
                  "the rows to load must ascend strictly");
    const std::vector<std::uint32_t> past_the_end = {0, kRows};
    options.rows = past_the_end;
    ExpectFailure(Load(spec, options), Status::OutOfRange(),
                  "no sample 600 in " + path + " from row 0: it holds 600");
    options.max_rows = 10;
    const std::vector<std::uint32_t> past_the_limit = {3, 10};
    options.rows = past_the_limit;
    ExpectFailure(Load(spec, options), Status::OutOfRange(),
                  "no sample 10 in " + path + " from row 0: it holds 10");
  }
}

// ---- NumPy ----

TEST_F(DataFileTest, NpyLoadsFloatsAndIntegerLabels) {
  const std::string x =
      Write("x.npy", Npy("<f4", "(3, 2)", LittleEndian(std::vector<float>{1, 2, 3, 4, 5, 6})));
  const std::string y =
      Write("y.npy", Npy("<i8", "(3,)", LittleEndian(std::vector<std::int64_t>{0, 2, 1})));
  HostResult<LabeledData> load = Load("npy:" + x + "," + y);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 3u);
  EXPECT_EQ(load->feature_dim, 2u);
  EXPECT_EQ(load->num_classes, 3u);
  EXPECT_EQ(load->features, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{0, 2, 1}));

  DataReadOptions options;
  options.first_row = 2;
  load = Load("npy:" + x + "," + y, options);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->features, (std::vector<float>{5, 6}));
  EXPECT_EQ(load->labels, std::vector<std::uint8_t>{1});
}

TEST_F(DataFileTest, NpyReadsBytesDoublesImagesAndColumnLabels) {
  const std::string bytes =
      Write("b.npy", Npy("|u1", "(2, 1, 2)", Bytes{0, 51, 255, 102}));  // (samples, 1, 2)
  const std::string doubles =
      Write("d.npy", Npy("<f8", "(2, 2)", LittleEndian(std::vector<double>{0.5, 1, 2, -4})));
  const std::string column =
      Write("c.npy", Npy("|u1", "(2, 1)", Bytes{9, 3}));  // (samples, 1) labels
  HostResult<LabeledData> load = Load("npy:" + bytes + "," + column);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->feature_dim, 2u);
  EXPECT_EQ(load->feature_bytes, (Bytes{0, 51, 255, 102}));
  EXPECT_EQ(Floats(load.value()),
            (std::vector<float>{0.0f, 51.0f / 255.0f, 1.0f, 102.0f / 255.0f}));
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{9, 3}));
  load = Load("npy:" + doubles + "," + column);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->features, (std::vector<float>{0.5f, 1, 2, -4}));

  // Version 2.0: a four-byte header length.
  Bytes v2 = Npy("<i4", "(2,)", LittleEndian(std::vector<std::int32_t>{1, 0}));
  v2[6] = 2;
  v2.insert(v2.begin() + 10, {0, 0});
  const std::string labels_v2 = Write("v2.npy", v2);
  load = Load("npy:" + bytes + "," + labels_v2);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{1, 0}));
}

TEST_F(DataFileTest, NpyReportsBadMagicVersionsAndHeaders) {
  const std::string y = Write("y.npy", Npy("|u1", "(1,)", Bytes{0}));
  std::string x = Write("a.npy", Text("PK\x03\x04 not numpy at all"));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "corrupt: bad magic in " + x + " (a .npy file begins \\x93NUMPY)");
  Bytes future = Npy("<f4", "(1, 1)", Bytes(4));
  future[6] = 4;
  x = Write("b.npy", future);
  ExpectFailure(Load("npy:" + x + "," + y), Status::InvalidArgument(),
                "unsupported .npy version 4.0 of " + x + " (read: 1.0 to 3.0)");
  const auto with_header = [](const std::string& dict) {
    Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    data_files::PutLittle(out, dict.size(), 2);
    out.insert(out.end(), dict.begin(), dict.end());
    return out;
  };
  x = Write("c.npy", with_header("{'descr': '<f4', 'shape': (1, 1), }"));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "corrupt: bad .npy header in " + x + ": no 'fortran_order'");
  x = Write("d.npy", with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), "
                                 "'extra': 1}"));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "corrupt: bad .npy header in " + x + ": unexpected key 'extra'");
  x = Write("e.npy", with_header("{'descr': '<f4', 'fortran_order': maybe}"));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "corrupt: bad .npy header in " + x + ": expected True or False at offset 34");
  x = Write("f.npy", with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1)}"));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "corrupt: bad .npy header in " + x + ": expected a tuple of sizes at offset 54");
  x = Write("g.npy", Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 100, 0, '{'});
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "truncated: " + x + " ends after 11 of 110 header bytes");
}

TEST_F(DataFileTest, NpyReportsUnsupportedTypesLayoutsAndShapes) {
  const std::string x =
      Write("x.npy", Npy("<f4", "(2, 1)", LittleEndian(std::vector<float>{1, 2})));
  const std::string y = Write("y.npy", Npy("|u1", "(2,)", Bytes{0, 1}));
  std::string bad = Write("a.npy", Npy(">f4", "(2, 1)", Bytes(8)));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::InvalidArgument(),
                "unsupported dtype '>f4' of the features in " + bad + " (read: |u1, <f4, <f8)");
  bad = Write("b.npy", Npy("<f4", "(2,)", LittleEndian(std::vector<float>{1, 0})));
  ExpectFailure(Load("npy:" + x + "," + bad), Status::InvalidArgument(),
                "unsupported dtype '<f4' of the labels in " + bad +
                    " (read: |u1, |i1, <u2, <i2, <u4, <i4, <u8, <i8)");
  Bytes fortran = Npy("<f4", "(2, 1)", Bytes(8));
  const std::string order = "'fortran_order': False";
  Bytes::iterator at = std::search(fortran.begin(), fortran.end(), order.begin(), order.end());
  std::copy_n("'fortran_order': True ", order.size(), at);
  bad = Write("c.npy", fortran);
  ExpectFailure(Load("npy:" + bad + "," + y), Status::InvalidArgument(),
                "unsupported layout of " + bad +
                    ": Fortran order (save a C-order array, numpy.ascontiguousarray)");
  bad = Write("d.npy", Npy("<f4", "(2,)", Bytes(8)));
  ExpectFailure(
      Load("npy:" + bad + "," + y), Status::InvalidArgument(),
      "unsupported shape (2,) of the features in " + bad + ": they need (samples, features...)");
  bad = Write("e.npy", Npy("|u1", "(1, 2)", Bytes{0, 1}));
  ExpectFailure(Load("npy:" + x + "," + bad), Status::InvalidArgument(),
                "unsupported shape (1, 2) of the labels in " + bad +
                    ": they need (samples,) or (samples, 1)");
  bad = Write("f.npy", Npy("|V8", "(2,)", Bytes(16)));
  EXPECT_EQ(Load("npy:" + x + "," + bad).status(), Status::InvalidArgument());
  bad = Write("g.npy", Npy("<f4", "(2, 0)", Bytes{}));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::DataLoss(),
                "corrupt: shape (2, 0) in " + bad + " has no features or is too large");
}

TEST_F(DataFileTest, NpyReportsShapeMismatchTruncationTrailingDataAndBadValues) {
  const std::string x =
      Write("x.npy", Npy("<f4", "(2, 1)", LittleEndian(std::vector<float>{1, 2})));
  std::string y = Write("y.npy", Npy("|u1", "(3,)", Bytes{0, 1, 2}));
  ExpectFailure(Load("npy:" + x + "," + y), Status::DataLoss(),
                "shape mismatch: " + x + " holds 2 samples but " + y + " holds 3 labels");
  y = Write("y2.npy", Npy("|u1", "(2,)", Bytes{0, 1}));
  std::string bad = Write("a.npy", Npy("<f4", "(2, 1)", Bytes(6)));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::DataLoss(),
                "truncated: expected 8 bytes of features in " + bad + ", got 6");
  bad = Write("b.npy", Npy("<f4", "(2, 1)", Bytes(9)));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::DataLoss(),
                "corrupt: " + bad + " has data after its 2 declared items");
  bad = Write("c.npy", Npy("<i2", "(2,)", LittleEndian(std::vector<std::int16_t>{0, -1})));
  ExpectFailure(Load("npy:" + x + "," + bad), Status::DataLoss(),
                "corrupt: label -1 of sample 1 in " + bad + " is outside 0-255");
  bad = Write("d.npy", Npy("<f4", "(2, 1)", LittleEndian(std::vector<float>{1, INFINITY})));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::DataLoss(),
                "corrupt: value inf of sample 1 in " + bad + " is not a finite float");
  bad = Write("e.npy", Npy("<f8", "(2, 1)", LittleEndian(std::vector<double>{1e300, 1})));
  ExpectFailure(Load("npy:" + bad + "," + y), Status::DataLoss(),
                "corrupt: value 1e+300 of sample 0 in " + bad + " is not a finite float");
  ExpectFailure(Load("npy:" + x + "," + dir_ + "/none.npy"), Status::NotFound(),
                "missing file " + dir_ + "/none.npy: No such file or directory");
}

}  // namespace
}  // namespace edgesgd::platform
