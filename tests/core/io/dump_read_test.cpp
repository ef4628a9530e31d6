// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "core/io/dump.h"
#include "tests/core/io/h5_builder.h"
#include "tests/core/io/read_heads_check.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using test::CanonicalShape;
using test::patternValue;

void expectPattern(const Tensor3& t, int layer, int kind, int sequence) {
  for (int64_t h = 0; h < t.heads; ++h)
    for (int64_t j = 0; j < t.tokens; ++j)
      for (int64_t d = 0; d < t.dim; ++d)
        ASSERT_EQ(t.at(h, j, d), static_cast<float>(patternValue(layer, kind, sequence, h, j, d)))
            << "layer " << layer << " kind " << kind << " seq " << sequence << " at " << h << ","
            << j << "," << d;
}

struct FloatTypeCase {
  const char* name;
  hid_t (*type)();
  const char* dtype;
};

class DumpReadFloatTypes : public ::testing::TestWithParam<FloatTypeCase> {};

TEST_P(DumpReadFloatTypes, EveryTensorReadsExactValuesAsFloat32) {
  test::TempDir dir;
  const std::string path = dir.file("d.h5");
  CanonicalShape shape;
  hid_t type = GetParam().type();
  test::writeCanonical(path, shape, type);
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  const DumpInfo& info = (*dump)->info();
  EXPECT_EQ(info.dtype, GetParam().dtype);
  EXPECT_EQ(info.layers, 2);
  EXPECT_EQ(info.kvHeads, 2);
  EXPECT_EQ(info.heads, 4);
  EXPECT_EQ(info.tokens, 5);
  EXPECT_EQ(info.queries, 3);
  EXPECT_EQ(info.headDim, 4);
  EXPECT_EQ(info.sequences, 1);
  EXPECT_EQ(info.model, "test-model");
  EXPECT_TRUE(info.hasQuery);
  EXPECT_TRUE(info.hasKeyPreRope);
  EXPECT_TRUE(info.canonical);
  EXPECT_DOUBLE_EQ(info.softmaxScale, 0.5);  // 1/sqrt(4) by default
  EXPECT_DOUBLE_EQ(info.ropeTheta, 10000.0);
  EXPECT_EQ(info.ropeStyle, RopeStyle::Half);
  for (int l = 0; l < 2; ++l)
    for (int kind = 0; kind < 4; ++kind) {
      auto t = (*dump)->read(l, static_cast<TensorKind>(kind));
      ASSERT_TRUE(t) << t.status().message();
      EXPECT_EQ(t->heads, kind == 2 ? 4 : 2);
      EXPECT_EQ(t->tokens, kind == 2 ? 3 : 5);
      EXPECT_EQ(t->dim, 4);
      expectPattern(*t, l, kind, 0);
    }
}

TEST_P(DumpReadFloatTypes, EveryHeadRangeReadsThatSliceOfTheWholeTensor) {
  test::TempDir dir;
  const std::string path = dir.file("d.h5");
  test::writeCanonical(path, CanonicalShape{}, GetParam().type());
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  for (int l = 0; l < 2; ++l)
    for (int kind = 0; kind < 4; ++kind) test::expectHeadRangesMatchRead(**dump, l, static_cast<TensorKind>(kind));
}

hid_t f16le() { return test::makeHalfType(H5T_ORDER_LE); }
hid_t f16be() { return test::makeHalfType(H5T_ORDER_BE); }
hid_t f32le() { return H5T_IEEE_F32LE; }
hid_t f32be() { return H5T_IEEE_F32BE; }
hid_t f64le() { return H5T_IEEE_F64LE; }
hid_t f64be() { return H5T_IEEE_F64BE; }

INSTANTIATE_TEST_SUITE_P(AllIeeeTypes, DumpReadFloatTypes,
                         ::testing::Values(FloatTypeCase{"f16le", f16le, "float16"},
                                           FloatTypeCase{"f16be", f16be, "float16"},
                                           FloatTypeCase{"f32le", f32le, "float32"},
                                           FloatTypeCase{"f32be", f32be, "float32"},
                                           FloatTypeCase{"f64le", f64le, "float64"},
                                           FloatTypeCase{"f64be", f64be, "float64"}),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(DumpRead, HalfValuesIncludingSubnormalsConvertExactly) {
  test::TempDir dir;
  const std::string path = dir.file("h.h5");
  // 2^-24 (smallest subnormal), 2^-14 (smallest normal), 65504 (largest), 1+2^-10, -0.5.
  const std::vector<double> values = {
      5.960464477539063e-08, 6.103515625e-05, 65504.0, 1.0009765625, -0.5, 3.0, -2.0, 0.0};
  {
    test::H5Builder b(path);
    b.intAttr("kvdump_version", 1);
    hid_t half = test::makeHalfType(H5T_ORDER_BE);
    b.floats("/layers/0/key", {1, 2, 4}, values, half);
    b.floats("/layers/0/value", {1, 2, 4}, values, half);
    H5Tclose(half);
  }
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  auto k = (*dump)->read(0, TensorKind::Key);
  ASSERT_TRUE(k);
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(k->data[i], static_cast<float>(values[i])) << i;
  EXPECT_FALSE((*dump)->info().hasQuery);
  EXPECT_EQ((*dump)->info().heads, 1);  // equals kvHeads without a query
}

TEST(DumpRead, BatchAxisSelectsEachSequence) {
  test::TempDir dir;
  const std::string path = dir.file("b.h5");
  CanonicalShape shape;
  shape.sequences = 3;
  test::writeCanonical(path, shape, H5T_IEEE_F32LE);
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  EXPECT_EQ((*dump)->info().sequences, 3);
  for (int b = 0; b < 3; ++b)
    for (int kind = 0; kind < 4; ++kind) {
      auto t = (*dump)->read(1, static_cast<TensorKind>(kind), b);
      ASSERT_TRUE(t) << t.status().message();
      expectPattern(*t, 1, kind, b);
    }
  auto bad = (*dump)->read(0, TensorKind::Key, 3);
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);
}

TEST(DumpRead, HeadRangesOfEverySequenceOfABatchAxis) {
  test::TempDir dir;
  const std::string path = dir.file("b.h5");
  CanonicalShape shape;
  shape.sequences = 3;
  test::writeCanonical(path, shape, test::makeHalfType(H5T_ORDER_LE));
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  for (int b = 0; b < 3; ++b)
    for (int kind = 0; kind < 4; ++kind) test::expectHeadRangesMatchRead(**dump, 1, static_cast<TensorKind>(kind), b);
}

TEST(DumpRead, AHeadRangeOutsideTheTensorIsAnErrorNamingFileDatasetAndRange) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  test::writeCanonical(path, CanonicalShape{}, H5T_IEEE_F32LE);  // KVH 2, H 4
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  struct Case {
    TensorKind kind;
    int64_t first, count;
    const char* message;
  };
  for (const Case& c :
       {Case{TensorKind::Key, 1, 2, "/layers/1/key: heads [1, 3) of layer 1 do not exist; the key has heads [0, 2)"},
        Case{TensorKind::Value, -1, 1,
             "/layers/1/value: heads [-1, 0) of layer 1 do not exist; the value has heads [0, 2)"},
        Case{TensorKind::KeyPreRope, 0, 0,
             "/layers/1/key_pre_rope: heads [0, 0) of layer 1 is an empty range; the key_pre_rope has heads [0, 2)"},
        Case{TensorKind::Query, 3, 2,
             "/layers/1/query: heads [3, 5) of layer 1 do not exist; the query has heads [0, 4)"}}) {
    auto bad = (*dump)->readHeads(1, c.kind, c.first, c.count);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);
    EXPECT_EQ(bad.status().message(), path + ": " + c.message);
    float buffer[64];
    auto into = (*dump)->readHeadsInto(1, c.kind, c.first, c.count, 0, buffer, 64);
    ASSERT_FALSE(into);
    EXPECT_EQ(into.status().message(), bad.status().message());
  }
  auto layer = (*dump)->readHeads(2, TensorKind::Key, 0, 1);
  ASSERT_FALSE(layer);
  EXPECT_NE(layer.status().message().find("layer 2 does not exist"), std::string::npos) << layer.status().message();
  float small[19];
  auto tooSmall = (*dump)->readHeadsInto(0, TensorKind::Key, 1, 1, 0, small, 19);  // T 5 × D 4 = 20
  ASSERT_FALSE(tooSmall);
  EXPECT_NE(tooSmall.status().message().find("too small"), std::string::npos) << tooSmall.status().message();
}

TEST(DumpRead, BatchAxisOfOneIsOneSequence) {
  test::TempDir dir;
  const std::string path = dir.file("b1.h5");
  CanonicalShape shape;
  shape.batchAxis = true;
  test::writeCanonical(path, shape, H5T_IEEE_F64LE);
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  EXPECT_EQ((*dump)->info().sequences, 1);
  auto t = (*dump)->read(0, TensorKind::Query);
  ASSERT_TRUE(t);
  expectPattern(*t, 0, 2, 0);
}

TEST(DumpRead, RootAttributesTokensTextAndLogits) {
  test::TempDir dir;
  const std::string path = dir.file("a.h5");
  CanonicalShape shape;
  shape.query = false;
  shape.keyPreRope = false;
  test::writeCanonical(path, shape);
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Fclose(f);
  }
  // Re-open for appending through the builder's C API calls.
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    auto attrD = [&](const char* n, double v) {
      hid_t sp = H5Screate(H5S_SCALAR);
      hid_t a = H5Acreate2(f, n, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
      H5Aclose(a);
      H5Sclose(sp);
    };
    auto attrS = [&](const char* n, const char* v) {
      hid_t ty = H5Tcopy(H5T_C_S1);
      H5Tset_size(ty, std::strlen(v));  // fixed-length, as some writers produce
      hid_t sp = H5Screate(H5S_SCALAR);
      hid_t a = H5Acreate2(f, n, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, ty, v);
      H5Aclose(a);
      H5Sclose(sp);
      H5Tclose(ty);
    };
    attrD("rope_theta", 500000.0);
    attrS("rope_style", "interleaved");
    attrD("softmax_scale", 0.125);
    attrS("model_path", "/models/x.bin");
    H5Fclose(f);
  }
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t t = 5, lv[2] = {5, 3};
    hid_t sp = H5Screate_simple(1, &t, nullptr);
    hid_t ds = H5Dcreate2(f, "tokens", H5T_STD_I32BE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int ids[5] = {1, 22, 333, 4444, 55555};
    H5Dwrite(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids);
    H5Dclose(ds);
    hid_t ty = H5Tcopy(H5T_C_S1);
    H5Tset_size(ty, H5T_VARIABLE);
    H5Tset_cset(ty, H5T_CSET_UTF8);
    ds = H5Dcreate2(f, "token_text", ty, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char* text[5] = {"<s>", " Hé", "llo", " wörld", "."};
    H5Dwrite(ds, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, text);
    H5Dclose(ds);
    H5Tclose(ty);
    H5Sclose(sp);
    sp = H5Screate_simple(2, lv, nullptr);
    ds = H5Dcreate2(f, "logits", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float logits[15];
    for (int i = 0; i < 15; ++i) logits[i] = static_cast<float>(i) - 7.5f;
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, logits);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
  }
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  const DumpInfo& info = (*dump)->info();
  EXPECT_DOUBLE_EQ(info.ropeTheta, 500000.0);
  EXPECT_EQ(info.ropeStyle, RopeStyle::Interleaved);
  EXPECT_DOUBLE_EQ(info.softmaxScale, 0.125);
  EXPECT_EQ(info.modelPath, "/models/x.bin");
  EXPECT_TRUE(info.hasTokens);
  EXPECT_TRUE(info.hasTokenText);
  EXPECT_TRUE(info.hasLogits);
  auto ids = (*dump)->tokens();
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<int64_t>{1, 22, 333, 4444, 55555}));
  auto text = (*dump)->tokenText();
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, (std::vector<std::string>{"<s>", " Hé", "llo", " wörld", "."}));
  auto logits = (*dump)->logits();
  ASSERT_TRUE(logits);
  ASSERT_EQ(logits->size(), 15u);
  EXPECT_EQ((*logits)[0], -7.5f);
  EXPECT_EQ((*logits)[14], 6.5f);
}

TEST(ScanNonFinite, CountsNanAndInfAndFindsTheFirst) {
  Tensor3 t(2, 3, 4, 1.0f);
  EXPECT_TRUE(scanNonFinite(t).allFinite());
  EXPECT_EQ(scanNonFinite(t).firstHead, -1);
  t.at(1, 0, 2) = std::numeric_limits<float>::quiet_NaN();
  t.at(1, 2, 3) = std::numeric_limits<float>::infinity();
  t.at(1, 2, 0) = -std::numeric_limits<float>::infinity();
  NonFiniteReport r = scanNonFinite(t);
  EXPECT_EQ(r.nanCount, 1);
  EXPECT_EQ(r.infCount, 2);
  EXPECT_EQ(r.firstHead, 1);
  EXPECT_EQ(r.firstToken, 0);
  EXPECT_EQ(r.firstChannel, 2);
  EXPECT_FALSE(r.allFinite());
}

TEST(TensorKindNames, MatchTheFormatsDatasetNames) {
  EXPECT_STREQ(tensorKindName(TensorKind::Key), "key");
  EXPECT_STREQ(tensorKindName(TensorKind::Value), "value");
  EXPECT_STREQ(tensorKindName(TensorKind::Query), "query");
  EXPECT_STREQ(tensorKindName(TensorKind::KeyPreRope), "key_pre_rope");
  EXPECT_STREQ(ropeStyleName(RopeStyle::Half), "half");
  EXPECT_STREQ(ropeStyleName(RopeStyle::Interleaved), "interleaved");
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

int64_t residentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096;
}

TEST(DumpRead, OpeningASixteenGigabyteDumpReadsNoData) {
  // 32 layers of fp16 K, V, pre-RoPE K [8, 131072, 128]: 16 GiB of K+V declared, none allocated.
  test::TempDir dir;
  const std::string path = dir.file("huge.h5");
  {
    test::H5Builder b(path);
    b.intAttr("kvdump_version", 1);
    hid_t half = test::makeHalfType(H5T_ORDER_LE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[3] = {1, 1024, 128};
    H5Pset_chunk(dcpl, 3, chunk);
    for (int l = 0; l < 32; ++l)
      for (const char* name : {"key", "value", "key_pre_rope"})
        b.floats("/layers/" + std::to_string(l) + "/" + name, {8, 131072, 128}, {}, half, dcpl);
    H5Pclose(dcpl);
    H5Tclose(half);
  }
  ASSERT_LT(std::filesystem::file_size(path), size_t{1} << 20);
  const int64_t before = residentBytes();
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  EXPECT_LT(residentBytes() - before, int64_t{100} << 20);
  const DumpInfo& info = (*dump)->info();
  EXPECT_EQ(info.layers, 32);
  EXPECT_EQ(info.tokens, 131072);
  EXPECT_EQ(info.bytesPerTokenFp16() * info.tokens, int64_t{16} << 30);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

TEST(DumpRead, ConcurrentReadsFromOneSharedDumpMatchSequentialReads) {
  test::TempDir dir;
  const std::string path = dir.file("c.h5");
  test::CanonicalShape shape;
  shape.layers = 6;
  shape.sequences = 2;
  test::writeCanonical(path, shape, test::makeHalfType(H5T_ORDER_LE));
  auto opened = Dump::open(path);
  ASSERT_TRUE(opened) << opened.status().message();
  std::shared_ptr<const Dump> dump = *opened;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0}, failures{0};
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round)
        for (int l = 0; l < 6; ++l) {
          const int kind = (l + w + round) % 4, seq = (w + round) % 2;
          auto t = dump->read(l, static_cast<TensorKind>(kind), seq);
          if (!t) {
            ++failures;
            continue;
          }
          for (int64_t h = 0; h < t->heads; ++h)
            for (int64_t j = 0; j < t->tokens; ++j)
              for (int64_t d = 0; d < t->dim; ++d)
                if (t->at(h, j, d) != static_cast<float>(test::patternValue(l, kind, seq, h, j, d)))
                  ++mismatches;
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(DumpRead, CustomBfloat16TypeConvertsThroughHdf5) {
  // bfloat16 has no predefined HDF5 type, but a writer can define one; HDF5 converts it.
  test::TempDir dir;
  const std::string path = dir.file("bf16.h5");
  const std::vector<double> values = {1.5, -2.0, 0.25, 3.0e38, -1.0e-38, 0.0, 96.0, -0.0078125};
  {
    test::H5Builder b(path);
    b.intAttr("kvdump_version", 1);
    hid_t bf16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(bf16, 15, 7, 8, 0, 7);
    H5Tset_size(bf16, 2);
    H5Tset_ebias(bf16, 127);
    b.floats("/layers/0/key", {1, 2, 4}, values, bf16);
    b.floats("/layers/0/value", {1, 2, 4}, values, bf16);
    H5Tclose(bf16);
  }
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  EXPECT_EQ((*dump)->info().dtype, "bfloat16");
  auto k = (*dump)->read(0, TensorKind::Key);
  ASSERT_TRUE(k);
  // Every value above is a bf16 value except 3.0e38 and -1.0e-38, which round to the nearest
  // bf16 on write (by HDF5); compare against bf16 truncation bounds instead of exact floats.
  for (size_t i : {0u, 1u, 2u, 5u, 6u, 7u})
    EXPECT_EQ(k->data[i], static_cast<float>(values[i])) << i;
  EXPECT_NEAR(k->data[3], 3.0e38, 3.0e38 / 128);
  EXPECT_NEAR(k->data[4], -1.0e-38, 1.0e-38 / 64);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

/// Writes `value` into sequence `sequence` of a [B, KVH, T, D] float32 dataset.
void writeSequence(hid_t file, const std::string& path, hsize_t sequence, float value) {
  hid_t ds = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(ds);
  hsize_t dims[4];
  H5Sget_simple_extent_dims(space, dims, nullptr);
  hsize_t start[4] = {sequence, 0, 0, 0}, count[4] = {1, dims[1], dims[2], dims[3]};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hsize_t n = dims[1] * dims[2] * dims[3];
  hid_t mem = H5Screate_simple(1, &n, nullptr);
  std::vector<float> v(n, value);
  ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data()), 0);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(ds);
}

// Finding 7: a 10 KiB file may declare a million sequences; only the ones written are stored.
TEST(DumpStoredData, ListsOnlyTheSequencesWhoseChunksAreInTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("sparse.h5");
  constexpr hsize_t kSequences = 1000000;
  {
    test::H5Builder b(path);
    b.intAttr("kvdump_version", 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[4] = {1, 2, 5, 4};  // one chunk per sequence
    H5Pset_chunk(dcpl, 4, chunk);
    for (const char* name : {"key", "value"})
      b.floats(std::string("/layers/0/") + name, {kSequences, 2, 5, 4}, {}, H5T_IEEE_F32LE, dcpl);
    H5Pclose(dcpl);
    writeSequence(b.file(), "/layers/0/key", 7, 1.5f);
    writeSequence(b.file(), "/layers/0/key", 3, 2.5f);
    writeSequence(b.file(), "/layers/0/key", 999999, 3.5f);
    // value: contiguous in a second layer below, chunked and never written here.
  }
  ASSERT_LT(std::filesystem::file_size(path), size_t{64} << 10);
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  ASSERT_EQ((*dump)->info().sequences, int(kSequences));
  auto key = (*dump)->storedData(0, TensorKind::Key);
  ASSERT_TRUE(key) << key.status().message();
  EXPECT_FALSE(key->everySequence);
  EXPECT_EQ(key->sequences, (std::vector<int>{3, 7, 999999}));
  EXPECT_FALSE(key->listTruncated);
  EXPECT_EQ(key->chunks, int64_t(kSequences));
  EXPECT_EQ(key->storedChunks, 3);
  EXPECT_EQ(key->storedBytes, 3 * 40 * 4);                   // three chunks of 2*5*4 float32
  EXPECT_EQ(key->declaredBytes, int64_t(kSequences) * 160);  // 160 bytes per sequence
  auto value = (*dump)->storedData(0, TensorKind::Value);
  ASSERT_TRUE(value);
  EXPECT_FALSE(value->everySequence);
  EXPECT_TRUE(value->sequences.empty());
  EXPECT_EQ(value->storedChunks, 0);
  // The stored sequence reads back; an unwritten one reads as the fill value 0.
  auto k = (*dump)->read(0, TensorKind::Key, 999999);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->data.front(), 3.5f);
  auto v = (*dump)->read(0, TensorKind::Value, 5);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->data.front(), 0.0f);
  EXPECT_EQ((*dump)->storedData(1, TensorKind::Key).status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ((*dump)->storedData(0, TensorKind::Query).status().code(),
            StatusCode::InvalidArgument);
}

TEST(DumpStoredData, AFullyWrittenDumpStoresEverySequence) {
  test::TempDir dir;
  const std::string path = dir.file("full.h5");
  CanonicalShape shape;
  shape.sequences = 3;
  shape.batchAxis = true;
  test::writeCanonical(path, shape);
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  for (TensorKind kind : {TensorKind::Key, TensorKind::Value, TensorKind::Query}) {
    auto s = (*dump)->storedData(1, kind);
    ASSERT_TRUE(s) << s.status().message();
    EXPECT_TRUE(s->everySequence) << tensorKindName(kind);
    EXPECT_GT(s->storedBytes, 0);
    EXPECT_EQ(s->storedBytes, s->declaredBytes) << tensorKindName(kind);
  }
}

TEST(DumpStoredData, AContiguousDatasetNeverWrittenStoresNothing) {
  test::TempDir dir;
  const std::string path = dir.file("empty.h5");
  {
    test::H5Builder b(path);
    b.intAttr("kvdump_version", 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    b.floats("/layers/0/key", {2, 5, 4}, {}, H5T_IEEE_F32LE, dcpl);
    b.floats("/layers/0/value", {2, 5, 4}, std::vector<double>(40, 1.0));
    H5Pclose(dcpl);
  }
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  auto key = (*dump)->storedData(0, TensorKind::Key);
  ASSERT_TRUE(key);
  EXPECT_FALSE(key->everySequence);
  EXPECT_EQ(key->storedBytes, 0);
  EXPECT_EQ(key->chunks, 0);
  auto value = (*dump)->storedData(0, TensorKind::Value);
  ASSERT_TRUE(value);
  EXPECT_TRUE(value->everySequence);
  EXPECT_EQ(value->storedBytes, 160);
}

}  // namespace
}  // namespace kvscope

namespace kvscope {
namespace {

TEST(DumpRead, ReadIntoFillsCallerMemoryLikeReadAndRefusesASmallBuffer) {
  test::TempDir dir;
  const std::string path = dir.file("d.h5");
  CanonicalShape shape;
  shape.sequences = 2;
  shape.batchAxis = true;
  test::writeCanonical(path, shape, test::makeHalfType(H5T_ORDER_LE));
  auto dump = Dump::open(path);
  ASSERT_TRUE(dump) << dump.status().message();
  std::vector<float> buffer(4 * 5 * 4 + 1, -99.0f);
  auto got = (*dump)->readInto(1, TensorKind::Query, 1, buffer.data(), int64_t(buffer.size()));
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(*got, (std::array<int64_t, 3>{4, 3, 4}));  // H, Tq, D
  Tensor3 viaBuffer(4, 3, 4);
  std::copy(buffer.begin(), buffer.begin() + 48, viaBuffer.data.begin());
  expectPattern(viaBuffer, 1, 2, 1);
  EXPECT_EQ(buffer[48], -99.0f) << "wrote past the slab";
  auto small = (*dump)->readInto(0, TensorKind::Key, 0, buffer.data(), 2 * 5 * 4 - 1);
  ASSERT_FALSE(small);
  EXPECT_NE(small.status().message().find("too small"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
