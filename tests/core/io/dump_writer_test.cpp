// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <hdf5.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/io/dump.h"
#include "core/io/dump_writer.h"
#include "core/io/h5.h"
#include "core/quant/fp_types.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

Tensor3 filled(int64_t h, int64_t t, int64_t d, float base) {
  Tensor3 x(h, t, d);
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = base + 0.5f * static_cast<float>(i % 37) - 3.25f;
  return x;
}

DumpWriterOptions smallOptions() {
  DumpWriterOptions o;
  o.layers = 2;
  o.kvHeads = 2;
  o.tokens = 6;
  o.headDim = 4;
  o.heads = 4;
  o.queries = 2;
  o.keyPreRope = true;
  o.dtype = DiskType::Float32;
  return o;
}

size_t filesIn(const fs::path& dir) {
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

TEST(DumpWriter, RoundTripsEveryDatasetAndAttributeWithABatchAxis) {
  test::TempDir dir;
  const std::string path = dir.file("rt.h5");
  DumpWriterOptions o = smallOptions();
  o.sequences = 2;
  o.withTokens = true;
  o.withTokenText = true;
  o.logitsVocab = 3;
  o.model = "tiny";
  o.ropeTheta = 1e6;
  o.ropeStyle = RopeStyle::Interleaved;
  o.softmaxScale = 0.25;
  o.stringAttributes["model_path"] = "/m/stories.bin";
  auto w = DumpWriter::create(path, o);
  ASSERT_TRUE(w) << w.status().message();
  for (int l = 0; l < 2; ++l) {
    std::vector<Tensor3> keys = {filled(2, 6, 4, float(l)), filled(2, 6, 4, float(l) + 10)};
    ASSERT_TRUE((*w)->writeAllSequences(l, TensorKind::Key, keys));
    for (int b = 0; b < 2; ++b) {
      ASSERT_TRUE((*w)->write(l, TensorKind::Value, filled(2, 6, 4, float(l + 100 * b) + 20), b));
      ASSERT_TRUE((*w)->write(l, TensorKind::Query, filled(4, 2, 4, float(l + 100 * b) + 30), b));
      ASSERT_TRUE(
          (*w)->write(l, TensorKind::KeyPreRope, filled(2, 6, 4, float(l + 100 * b) + 40), b));
    }
  }
  for (int b = 0; b < 2; ++b) {
    ASSERT_TRUE((*w)->writeTokens({1, 2, 3, 4, 5, 6 + b}, b));
    ASSERT_TRUE((*w)->writeTokenText({"<s>", "a", "é", "", "c", b ? "y" : "x"}, b));
    std::vector<float> logits(18);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i) + 100.0f * float(b);
    ASSERT_TRUE((*w)->writeLogits(logits, b));
  }
  ASSERT_TRUE((*w)->finish());
  w->reset();

  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  const DumpInfo& info = (*dump)->info();
  EXPECT_EQ(info.sequences, 2);
  EXPECT_EQ(info.layers, 2);
  EXPECT_EQ(info.heads, 4);
  EXPECT_EQ(info.queries, 2);
  EXPECT_EQ(info.dtype, "float32");
  EXPECT_EQ(info.model, "tiny");
  EXPECT_EQ(info.modelPath, "/m/stories.bin");
  EXPECT_DOUBLE_EQ(info.ropeTheta, 1e6);
  EXPECT_EQ(info.ropeStyle, RopeStyle::Interleaved);
  EXPECT_DOUBLE_EQ(info.softmaxScale, 0.25);
  EXPECT_TRUE(info.hasTokens && info.hasTokenText && info.hasLogits && info.hasKeyPreRope);
  for (int l = 0; l < 2; ++l)
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ((*dump)->read(l, TensorKind::Key, b)->data,
                filled(2, 6, 4, float(l) + 10 * b).data);
      EXPECT_EQ((*dump)->read(l, TensorKind::Value, b)->data,
                filled(2, 6, 4, float(l + 100 * b) + 20).data);
      EXPECT_EQ((*dump)->read(l, TensorKind::Query, b)->data,
                filled(4, 2, 4, float(l + 100 * b) + 30).data);
      EXPECT_EQ((*dump)->read(l, TensorKind::KeyPreRope, b)->data,
                filled(2, 6, 4, float(l + 100 * b) + 40).data);
    }
  EXPECT_EQ(*(*dump)->tokens(1), (std::vector<int64_t>{1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(*(*dump)->tokenText(0), (std::vector<std::string>{"<s>", "a", "é", "", "c", "x"}));
  auto logits = (*dump)->logits(1);
  ASSERT_TRUE(logits);
  EXPECT_EQ((*logits)[0], 100.0f);
  EXPECT_EQ((*logits)[17], 117.0f);
}

TEST(DumpWriter, Fp16RoundsToNearestEven) {
  test::TempDir dir;
  const std::string path = dir.file("h.h5");
  const float e = std::ldexp(1.0f, -11);  // half of fp16's ulp at 1
  // Each input and the binary16 value it must become (hand-derived).
  const std::vector<std::pair<float, float>> cases = {
      {1.0f + e, 1.0f},                                  // tie, 1.0 is even
      {1.0f + 3 * e, 1.0f + 4 * e},                      // tie, rounds up to the even mantissa
      {1.0f + e + std::ldexp(1.0f, -20), 1.0f + 2 * e},  // above the tie
      {-(1.0f + e), -1.0f},
      {65519.0f, 65504.0f},                                // below the overflow tie
      {65520.0f, std::numeric_limits<float>::infinity()},  // tie at the top: overflows
      {std::ldexp(1.0f, -25), 0.0f},                       // tie with zero: even is 0
      {std::ldexp(3.0f, -26), std::ldexp(1.0f, -24)},      // above half the smallest subnormal
      {std::ldexp(3.0f, -25), std::ldexp(2.0f, -24)},      // subnormal tie 1.5 ulp → 2 ulp
      {2049.0f, 2048.0f},                                  // integer tie, ulp 2
      {2051.0f, 2052.0f},
  };
  DumpWriterOptions o;
  o.layers = 1;
  o.kvHeads = 1;
  o.tokens = 1;
  o.headDim = static_cast<int>(cases.size());
  o.dtype = DiskType::Float16;
  Tensor3 k(1, 1, o.headDim);
  for (size_t i = 0; i < cases.size(); ++i) k.data[i] = cases[i].first;
  {
    auto w = DumpWriter::create(path, o);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->write(0, TensorKind::Key, k));
    ASSERT_TRUE((*w)->write(0, TensorKind::Value, k));
    ASSERT_TRUE((*w)->finish());
  }
  // The file type really is 16-bit IEEE.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(f, "/layers/0/key", H5P_DEFAULT);
  hid_t t = H5Dget_type(ds);
  EXPECT_EQ(H5Tget_class(t), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(t), 2u);
  // And HDF5's own conversion of what we stored agrees with the expectation.
  std::vector<double> viaHdf5(cases.size());
  ASSERT_GE(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, viaHdf5.data()), 0);
  H5Tclose(t);
  H5Dclose(ds);
  H5Fclose(f);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(viaHdf5[i], double(cases[i].second)) << "case " << i;

  auto dump = Dump::open(path);
  ASSERT_TRUE(dump);
  EXPECT_EQ((*dump)->info().dtype, "float16");
  auto back = (*dump)->read(0, TensorKind::Key);
  ASSERT_TRUE(back);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(back->data[i], cases[i].second) << "case " << i;
}

TEST(HalfConversion, AgreesWithRoundingThroughDoubleOnEveryHalfInterval) {
  // For every finite half h and the midpoint to the next one, check RNE against an
  // independent computation in double.
  for (uint32_t bits = 0; bits < 0x7bffu; ++bits) {
    const float lo = fp::fp16Value(static_cast<uint16_t>(bits));
    const float hi = fp::fp16Value(static_cast<uint16_t>(bits + 1));
    ASSERT_EQ(fp::fp16Bits(lo), bits);
    const double mid = (double(lo) + double(hi)) / 2.0;
    const uint16_t even =
        (bits & 1u) ? static_cast<uint16_t>(bits + 1) : static_cast<uint16_t>(bits);
    ASSERT_EQ(fp::fp16Bits(static_cast<float>(mid)), even) << bits;
    ASSERT_EQ(fp::fp16Bits(std::nextafter(static_cast<float>(mid), 0.0f)), bits) << bits;
    ASSERT_EQ(fp::fp16Bits(std::nextafter(static_cast<float>(mid), 1e9f)), bits + 1) << bits;
  }
  EXPECT_TRUE(std::isnan(fp::fp16Value(fp::fp16Bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(fp::fp16Bits(-0.0f), 0x8000u);
}

TEST(DumpWriter, DestroyedWithoutFinishLeavesThePreviousFileAndNoTemporary) {
  test::TempDir dir;
  const std::string path = dir.file("keep.h5");
  std::ofstream(path) << "previous";
  {
    auto w = DumpWriter::create(path, smallOptions());
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->write(0, TensorKind::Key, filled(2, 6, 4, 0)));
    EXPECT_EQ(filesIn(dir.path()), 2u);  // the temporary exists meanwhile
  }
  EXPECT_EQ(filesIn(dir.path()), 1u);
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "previous");
}

TEST(DumpWriter, FinishRefusesMissingDatasetsAndRemovesTheTemporary) {
  test::TempDir dir;
  const std::string path = dir.file("partial.h5");
  {
    auto w = DumpWriter::create(path, smallOptions());
    ASSERT_TRUE(w);
    for (int l = 0; l < 2; ++l) {
      ASSERT_TRUE((*w)->write(l, TensorKind::Key, filled(2, 6, 4, 0)));
      ASSERT_TRUE((*w)->write(l, TensorKind::Value, filled(2, 6, 4, 0)));
      ASSERT_TRUE((*w)->write(l, TensorKind::KeyPreRope, filled(2, 6, 4, 0)));
    }
    ASSERT_TRUE((*w)->write(0, TensorKind::Query, filled(4, 2, 4, 0)));
    Status st = (*w)->finish();
    EXPECT_FALSE(st);
    EXPECT_NE(st.message().find("/layers/1/query"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("partial.h5"), std::string::npos) << st.message();
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(filesIn(dir.path()), 0u);
}

TEST(DumpWriter, RefusesTensorsOfTheWrongShapeNamingTheDataset) {
  test::TempDir dir;
  auto w = DumpWriter::create(dir.file("s.h5"), smallOptions());
  ASSERT_TRUE(w);
  Status st = (*w)->write(1, TensorKind::Value, filled(2, 5, 4, 0));
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("/layers/1/value"), std::string::npos) << st.message();
  EXPECT_FALSE((*w)->write(2, TensorKind::Key, filled(2, 6, 4, 0)));
  EXPECT_FALSE((*w)->write(0, TensorKind::Key, filled(2, 6, 4, 0), 1));  // one sequence only
  EXPECT_FALSE((*w)->writeTokens({1, 2, 3, 4, 5, 6}));                   // not declared
}

TEST(DumpWriter, RefusesInconsistentOptionsAndMissingFolders) {
  test::TempDir dir;
  DumpWriterOptions o = smallOptions();
  o.heads = 3;  // not a multiple of 2 kv heads
  EXPECT_EQ(DumpWriter::create(dir.file("a.h5"), o).status().code(), StatusCode::InvalidArgument);
  o = smallOptions();
  o.queries = 7;  // more than 6 tokens
  EXPECT_FALSE(DumpWriter::create(dir.file("a.h5"), o));
  auto missing = DumpWriter::create(dir.file("no/such/folder/a.h5"), smallOptions());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::IoError);
  EXPECT_EQ(filesIn(dir.path()), 0u);
}

// HDF5 1.10's sec2 driver describes a failed write over several lines (copied from a real
// `ulimit -f` failure); users get the OS error alone.
TEST(H5Errors, AFileDriverFailureBecomesItsOsErrorOnOneLine) {
  const std::string driver =
      "file write failed: time = Sun Nov 29 13:26:11 2026\n, filename = '.p.h5.kvscope-tmp-1', "
      "file descriptor = 3, errno = 27, error message = 'File too large', buf = 0x562e8d3f90f0, "
      "total write size = 4096, bytes this sub-write = 4096, bytes actually written = "
      "18446744073709551615, offset = 0";
  EXPECT_EQ(h5::osErrnoIn(driver), EFBIG);
  EXPECT_EQ(h5::osErrnoIn("unable to open file: name = 'x'"), 0);
  EXPECT_EQ(h5::osErrnoIn("errno = banana"), 0);
  EXPECT_EQ(h5::oneLine(driver), "file write failed: time = Sun Nov 29 13:26:11 2026");
  EXPECT_EQ(h5::oneLine("wrong B-tree signature"), "wrong B-tree signature");
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Regression for the reliability finding "synth accepts absurd sizes and fills the disk".
TEST(DumpWriter, RefusesADumpLargerThanTheFreeSpaceBeforeWriting) {
  test::TempDir dir;
  const std::string path = dir.file("huge.h5");
  DumpWriterOptions o = smallOptions();
  o.layers = 100000;
  o.tokens = 100000;
  o.headDim = 1024;  // ~6e15 bytes: more than any disk this runs on
  auto w = DumpWriter::create(path, o);
  ASSERT_FALSE(w.hasValue());
  EXPECT_EQ(w.status().code(), StatusCode::ResourceLimit);
  EXPECT_NE(w.status().message().find("huge.h5"), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("free"), std::string::npos) << w.status().message();
  // Both sizes in units a person reads (223.5 TiB needed).
  EXPECT_NE(w.status().message().find("223.5 TiB but only "), std::string::npos) << w.status().message();
  EXPECT_EQ(filesIn(dir.path()), 0u);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

// Finding 3: a layer is written in ~1 MiB blocks with a cancellation check before each. With
// head dim 8 in fp16 a token row is 16 bytes, so a block is 65536 tokens: 150000 tokens make
// three blocks per head (65536, 65536, 18928), six for two heads.
DumpWriterOptions longOptions() {
  DumpWriterOptions o;
  o.layers = 1;
  o.kvHeads = 2;
  o.tokens = 150000;
  o.headDim = 8;
  o.dtype = DiskType::Float16;
  return o;
}

Tensor3 halfExact(int64_t h, int64_t t, int64_t d, float base) {
  Tensor3 x(h, t, d);
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = base + 0.25f * float(i % 61);
  return x;
}

TEST(DumpWriter, WritesInBlocksAskingToCancelBeforeEachAndReadsBackExactly) {
  test::TempDir dir;
  const std::string path = dir.file("long.h5");
  DumpWriterOptions o = longOptions();
  std::vector<double> asked;
  o.cancel = [&](double fraction, std::string_view) {
    asked.push_back(fraction);
    return true;
  };
  auto w = DumpWriter::create(path, o);
  ASSERT_TRUE(w) << w.status().message();
  const Tensor3 k = halfExact(2, 150000, 8, -4.0f), v = halfExact(2, 150000, 8, 1.0f);
  ASSERT_TRUE((*w)->write(0, TensorKind::Key, k));
  EXPECT_EQ(asked, (std::vector<double>{0.0, 1.0 / 6, 2.0 / 6, 3.0 / 6, 4.0 / 6, 5.0 / 6}));
  ASSERT_TRUE((*w)->write(0, TensorKind::Value, v));
  EXPECT_EQ(asked.size(), 12u);
  ASSERT_TRUE((*w)->finish());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  auto kr = (*dump)->read(0, TensorKind::Key), vr = (*dump)->read(0, TensorKind::Value);
  ASSERT_TRUE(kr && vr);
  EXPECT_EQ(kr->data, k.data);  // multiples of 1/4 below 16: exact in fp16, block seams too
  EXPECT_EQ(vr->data, v.data);
}

TEST(DumpWriter, ACancelledWriteStopsAtTheNextBlockAndLeavesNoFile) {
  test::TempDir dir;
  const std::string path = dir.file("long.h5");
  std::ofstream(path) << "previous";
  DumpWriterOptions o = longOptions();
  int calls = 0;
  o.cancel = [&](double, std::string_view) { return ++calls < 3; };
  {
    auto w = DumpWriter::create(path, o);
    ASSERT_TRUE(w) << w.status().message();
    const Status st = (*w)->write(0, TensorKind::Key, halfExact(2, 150000, 8, 0.0f));
    EXPECT_EQ(st.code(), StatusCode::Cancelled) << st.message();
    EXPECT_EQ(calls, 3);  // two blocks written, the third refused
    EXPECT_FALSE((*w)->finish());
  }
  EXPECT_EQ(filesIn(dir.path()), 1u);
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "previous");
}

}  // namespace
}  // namespace kvscope
