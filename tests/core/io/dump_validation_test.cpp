// SPDX-License-Identifier: GPL-3.0-or-later
// Every malformed layout the reader must refuse, each with a message naming the file and the
// dataset or attribute. The files are built here with the HDF5 C API.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "core/io/dump.h"
#include "tests/core/io/h5_builder.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

using test::H5Builder;

std::vector<double> zeros(size_t n) { return std::vector<double>(n, 0.0); }

/// Adds a valid layer l ([KVH=2, T=4, D=4] keys/values) unless told to skip a tensor.
void addLayer(H5Builder& b, int l, bool key = true, bool value = true) {
  const std::string g = "/layers/" + std::to_string(l);
  if (key) b.floats(g + "/key", {2, 4, 4}, zeros(32));
  if (value) b.floats(g + "/value", {2, 4, 4}, zeros(32));
}

class DumpValidation : public ::testing::Test {
 protected:
  void SetUp() override { ::testing::internal::CaptureStderr(); }
  void TearDown() override {
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("HDF5-DIAG"), std::string::npos) << err;
  }

  /// Builds a file with `build`, opens it, expects failure with `code` and every `needles`.
  Status expectRefused(const std::function<void(H5Builder&)>& build, StatusCode code,
                       const std::vector<std::string>& needles, const OpenOptions& options = {}) {
    {
      H5Builder b(path_);
      build(b);
    }
    auto dump = Dump::open(path_, options);
    EXPECT_FALSE(dump) << "opened although it should not";
    if (dump) return Status::ok();
    const Status st = dump.status();
    if (std::getenv("KVSCOPE_TEST_SHOW_MESSAGES")) std::printf("%s\n", st.message().c_str());
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_EQ(st.message().rfind(path_ + ": ", 0), 0u)
        << "message does not start with the file: " << st.message();
    for (const auto& n : needles)
      EXPECT_NE(st.message().find(n), std::string::npos)
          << "'" << n << "' not in: " << st.message();
    return st;
  }

  test::TempDir dir_;
  std::string path_ = dir_.file("bad.h5");
};

TEST_F(DumpValidation, MissingFileIsAnIoErrorNamingIt) {
  auto dump = Dump::open(dir_.file("nope.h5"));
  ASSERT_FALSE(dump);
  EXPECT_EQ(dump.status().code(), StatusCode::IoError);
  EXPECT_NE(dump.status().message().find("nope.h5"), std::string::npos);
}

TEST_F(DumpValidation, TextFileIsNotHdf5) {
  std::ofstream(path_) << "key,value\n1,2\n";
  auto dump = Dump::open(path_);
  ASSERT_FALSE(dump);
  EXPECT_EQ(dump.status().code(), StatusCode::InvalidData);
  EXPECT_NE(dump.status().message().find(path_ + ": "), std::string::npos);
  EXPECT_NE(dump.status().message().find("not an HDF5 file"), std::string::npos);
}

TEST_F(DumpValidation, TextFileOpenedOnOtherThreadsPrintsNoHdf5Diagnostics) {
  // libhdf5 built thread-safe keeps its error stack and automatic printing per thread: the GUI
  // opens dumps on worker threads, each of which must switch the print-out off for itself
  // (TearDown checks stderr for "HDF5-DIAG").
  std::ofstream(path_) << "not an HDF5 file\n";
  for (int i = 0; i < 2; ++i) {
    std::thread worker([this] {
      auto dump = Dump::open(path_);
      EXPECT_FALSE(dump);
    });
    worker.join();
  }
}

TEST_F(DumpValidation, MissingVersionAttribute) {
  expectRefused([](H5Builder& b) { addLayer(b, 0); }, StatusCode::InvalidData,
                {"kvdump_version", "missing", "mapping"});
}

TEST_F(DumpValidation, VersionOfTheWrongType) {
  expectRefused(
      [](H5Builder& b) {
        b.stringAttr("kvdump_version", "1");
        addLayer(b, 0);
      },
      StatusCode::InvalidData, {"kvdump_version", "wrong type"});
}

TEST_F(DumpValidation, UnknownVersionIsUnsupported) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 2);
        addLayer(b, 0);
      },
      StatusCode::Unsupported, {"kvdump_version", "2"});
}

TEST_F(DumpValidation, ModelAttributeMustBeAString) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.intAttr("model", 7);
        addLayer(b, 0);
      },
      StatusCode::InvalidData, {"model", "wrong type"});
}

TEST_F(DumpValidation, RopeThetaMustBeANumber) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.stringAttr("rope_theta", "10000");
        addLayer(b, 0);
      },
      StatusCode::InvalidData, {"rope_theta", "wrong type"});
}

TEST_F(DumpValidation, RopeStyleMustBeKnown) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.stringAttr("rope_style", "neox");
        addLayer(b, 0);
      },
      StatusCode::InvalidData, {"rope_style", "neox"});
}

TEST_F(DumpValidation, SoftmaxScaleMustBeANumber) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.stringAttr("softmax_scale", "0.1");
        addLayer(b, 0);
      },
      StatusCode::InvalidData, {"softmax_scale", "wrong type"});
}

TEST_F(DumpValidation, MissingLayersGroup) {
  expectRefused([](H5Builder& b) { b.intAttr("kvdump_version", 1); }, StatusCode::InvalidData,
                {"/layers", "missing"});
}

TEST_F(DumpValidation, GapInLayerNumbers) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        addLayer(b, 1);
        addLayer(b, 3);
      },
      StatusCode::InvalidData, {"/layers/2", "gap"});
}

TEST_F(DumpValidation, LayerNamesMustBeNumbers) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.group("/layers/extra");
      },
      StatusCode::InvalidData, {"/layers/extra"});
}

TEST_F(DumpValidation, MissingKey) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        addLayer(b, 1, false, true);
      },
      StatusCode::InvalidData, {"/layers/1/key", "missing"});
}

TEST_F(DumpValidation, MissingValue) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0, true, false);
      },
      StatusCode::InvalidData, {"/layers/0/value", "missing"});
}

TEST_F(DumpValidation, OptionalDatasetMissingInOneLayer) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        addLayer(b, 1);
        b.floats("/layers/0/query", {2, 2, 4}, zeros(16));
      },
      StatusCode::InvalidData, {"/layers/1/query", "missing"});
}

TEST_F(DumpValidation, KeyOfRankTwo) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {4, 4}, zeros(16));
        b.floats("/layers/0/value", {4, 4}, zeros(16));
      },
      StatusCode::InvalidData, {"/layers/0/key", "axes"});
}

TEST_F(DumpValidation, ValueRankDiffersFromKey) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {2, 4, 4}, zeros(32));
        b.floats("/layers/0/value", {1, 2, 4, 4}, zeros(32));
      },
      StatusCode::InvalidData, {"/layers/0/value", "axes"});
}

TEST_F(DumpValidation, ValueShapeDiffersFromKey) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {2, 4, 4}, zeros(32));
        b.floats("/layers/0/value", {2, 3, 4}, zeros(24));
      },
      StatusCode::InvalidData, {"/layers/0/value", "[2, 3, 4]", "[2, 4, 4]"});
}

TEST_F(DumpValidation, KeyPreRopeShapeDiffersFromKey) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/layers/0/key_pre_rope", {2, 4, 2}, zeros(16));
      },
      StatusCode::InvalidData, {"/layers/0/key_pre_rope"});
}

TEST_F(DumpValidation, LayerShapesMustAgree) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/layers/1/key", {2, 5, 4}, zeros(40));
        b.floats("/layers/1/value", {2, 5, 4}, zeros(40));
      },
      StatusCode::InvalidData, {"/layers/1/key", "differs from /layers/0/key"});
}

TEST_F(DumpValidation, QueryHeadDimDiffers) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/layers/0/query", {2, 2, 8}, zeros(32));
      },
      StatusCode::InvalidData, {"/layers/0/query", "head dim"});
}

TEST_F(DumpValidation, QueryHeadsNotAMultipleOfKvHeads) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/layers/0/query", {3, 2, 4}, zeros(24));
      },
      StatusCode::InvalidData, {"/layers/0/query", "multiple"});
}

TEST_F(DumpValidation, MoreQueriesThanTokens) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/layers/0/query", {4, 5, 4}, zeros(80));
      },
      StatusCode::InvalidData, {"/layers/0/query", "5 queries", "4 tokens"});
}

TEST_F(DumpValidation, QueryBatchDiffersFromKey) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {2, 2, 4, 4}, zeros(64));
        b.floats("/layers/0/value", {2, 2, 4, 4}, zeros(64));
        b.floats("/layers/0/query", {3, 2, 1, 4}, zeros(24));
      },
      StatusCode::InvalidData, {"/layers/0/query", "batch"});
}

TEST_F(DumpValidation, IntegerKeysAreNotFloats) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.ints("/layers/0/key", {2, 4, 4}, std::vector<int64_t>(32, 0), H5T_STD_I32LE);
        b.floats("/layers/0/value", {2, 4, 4}, zeros(32));
      },
      StatusCode::InvalidData, {"/layers/0/key", "integer"});
}

TEST_F(DumpValidation, StringValuesAreNotFloats) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {2, 4, 4}, zeros(32));
        b.strings("/layers/0/value", {2}, {"a", "b"});
      },
      StatusCode::InvalidData, {"/layers/0/value", "string"});
}

TEST_F(DumpValidation, CompoundQueriesAreNotFloats) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        hid_t type = H5Tcreate(H5T_COMPOUND, 8);
        H5Tinsert(type, "re", 0, H5T_NATIVE_FLOAT);
        H5Tinsert(type, "im", 4, H5T_NATIVE_FLOAT);
        hsize_t dims[3] = {2, 2, 4};
        hid_t space = H5Screate_simple(3, dims, nullptr);
        hid_t ds = H5Dcreate2(b.file(), "/layers/0/query", type, space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
        H5Dclose(ds);
        H5Sclose(space);
        H5Tclose(type);
      },
      StatusCode::InvalidData, {"/layers/0/query", "compound"});
}

TEST_F(DumpValidation, ZeroSizedAxis) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        b.floats("/layers/0/key", {2, 0, 4}, {});
        b.floats("/layers/0/value", {2, 0, 4}, {});
      },
      StatusCode::InvalidData, {"/layers/0/key", "size 0"});
}

TEST_F(DumpValidation, LayerLargerThanMemoryIsRefusedBeforeReading) {
  // 2^21 × 2^20 float32 = 8 TiB for one layer; nothing is ever allocated in the file.
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        hsize_t chunk[3] = {1, 64, 64};
        H5Pset_chunk(dcpl, 3, chunk);
        b.floats("/layers/0/key", {1, hsize_t{1} << 21, hsize_t{1} << 20}, {}, H5T_IEEE_F32LE,
                 dcpl);
        b.floats("/layers/0/value", {1, hsize_t{1} << 21, hsize_t{1} << 20}, {}, H5T_IEEE_F32LE,
                 dcpl);
        H5Pclose(dcpl);
      },
      StatusCode::ResourceLimit, {"/layers/0/key", "memory"});
}

TEST_F(DumpValidation, TokensOfTheWrongShape) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.ints("/tokens", {3}, {1, 2, 3});
      },
      StatusCode::InvalidData, {"/tokens", "[3]"});
}

TEST_F(DumpValidation, TokensMustBeIntegers) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        addLayer(b, 0);
        b.floats("/tokens", {4}, zeros(4));
      },
      StatusCode::InvalidData, {"/tokens", "integer"});
}

TEST_F(DumpValidation, UndecodableFilterIsUnsupportedAndNamed) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", 1);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        hsize_t chunk[3] = {1, 4, 4};
        H5Pset_chunk(dcpl, 3, chunk);
        // 32001 is Blosc's registered id; optional, so HDF5 writes without it, but records it.
        unsigned cd[1] = {0};
        ASSERT_GE(H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 1, cd), 0);
        b.floats("/layers/0/key", {2, 4, 4}, zeros(32), H5T_IEEE_F32LE, dcpl);
        H5Pclose(dcpl);
        b.floats("/layers/0/value", {2, 4, 4}, zeros(32));
      },
      StatusCode::Unsupported, {"/layers/0/key", "32001"});
}

TEST_F(DumpValidation, ExternalLinkRefusedUnlessAllowed) {
  const std::string other = dir_.file("other.h5");
  {
    H5Builder o(other);
    o.floats("/k", {2, 4, 4}, zeros(32));
  }
  auto build = [&](H5Builder& b) {
    b.intAttr("kvdump_version", 1);
    b.group("/layers/0");
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/k", b.file(), "/layers/0/key", H5P_DEFAULT,
                                 H5P_DEFAULT),
              0);
    b.floats("/layers/0/value", {2, 4, 4}, zeros(32));
  };
  expectRefused(build, StatusCode::InvalidData, {"/layers/0/key", "external link"});
  OpenOptions allow;
  allow.allowExternalStorage = true;
  auto dump = Dump::open(path_, allow);
  ASSERT_TRUE(dump) << dump.status().message();
  EXPECT_TRUE((*dump)->read(0, TensorKind::Key));
}

TEST_F(DumpValidation, ExternalRawStorageRefusedUnlessAllowed) {
  auto build = [&](H5Builder& b) {
    b.intAttr("kvdump_version", 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, (dir_.path() / "raw.bin").c_str(), 0, 32 * 4);
    b.floats("/layers/0/key", {2, 4, 4}, zeros(32), H5T_IEEE_F32LE, dcpl);
    H5Pclose(dcpl);
    b.floats("/layers/0/value", {2, 4, 4}, zeros(32));
  };
  expectRefused(build, StatusCode::InvalidData, {"/layers/0/key", "external raw"});
  OpenOptions allow;
  allow.allowExternalStorage = true;
  EXPECT_TRUE(Dump::open(path_, allow));
}

TEST_F(DumpValidation, VirtualDatasetRefusedUnlessAllowed) {
  const std::string source = dir_.file("source.h5");
  {
    H5Builder o(source);
    o.floats("/k", {2, 4, 4}, zeros(32));
  }
  auto build = [&](H5Builder& b) {
    b.intAttr("kvdump_version", 1);
    hsize_t dims[3] = {2, 4, 4};
    hid_t vspace = H5Screate_simple(3, dims, nullptr);
    hid_t sspace = H5Screate_simple(3, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ASSERT_GE(H5Pset_virtual(dcpl, vspace, source.c_str(), "/k", sspace), 0);
    b.group("/layers/0");
    hid_t ds = H5Dcreate2(b.file(), "/layers/0/key", H5T_IEEE_F32LE, vspace, H5P_DEFAULT, dcpl,
                          H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(vspace);
    H5Sclose(sspace);
    b.floats("/layers/0/value", {2, 4, 4}, zeros(32));
  };
  expectRefused(build, StatusCode::InvalidData, {"/layers/0/key", "virtual"});
  OpenOptions allow;
  allow.allowExternalStorage = true;
  EXPECT_TRUE(Dump::open(path_, allow));
}

TEST_F(DumpValidation, TruncatedFilesAreRefusedOrFailOnReadWithoutCrashing) {
  test::CanonicalShape shape;
  shape.tokens = 64;
  shape.headDim = 16;
  test::writeCanonical(path_, shape);
  const auto full = std::filesystem::file_size(path_);
  std::string bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (double fraction : {0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99}) {
    const std::string cut = dir_.file("cut.h5");
    {
      std::ofstream out(cut, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(double(full) * fraction));
    }
    auto dump = Dump::open(cut);
    if (!dump) {
      EXPECT_NE(dump.status().message().find(cut), std::string::npos) << dump.status().message();
      continue;
    }
    // Metadata survived; reading every layer either works or fails cleanly with the path.
    for (int l = 0; l < (*dump)->info().layers; ++l)
      for (TensorKind kind : {TensorKind::Key, TensorKind::Value}) {
        auto t = (*dump)->read(l, kind);
        if (!t) {
          EXPECT_NE(t.status().message().find(cut), std::string::npos);
        }
      }
  }
}


// Issue 33: kvdump_version 2^63 − 1 was printed negative (a double cast back to int64).
TEST_F(DumpValidation, AHugeVersionIsPrintedAsStored) {
  expectRefused(
      [](H5Builder& b) {
        b.intAttr("kvdump_version", INT64_MAX);
        addLayer(b, 0);
      },
      StatusCode::Unsupported, {"kvdump_version: version 9223372036854775807 is not supported"});
}

// Issue 33: a dump truncated while eval ran read its missing layers as zeros (HDF5's sec2
// driver fills a read past the end of the file with zeros), which quantize perfectly: eval
// reported them as undamaged. Every read after the file shrank is refused.
TEST_F(DumpValidation, AFileThatShrinksWhileOpenIsRefusedNotReadAsZeros) {
  {
    H5Builder b(path_);
    b.intAttr("kvdump_version", 1);
    std::vector<double> v(2 * 64 * 64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0 + double(i % 7);
    for (int l = 0; l < 4; ++l) {
      const std::string g = "/layers/" + std::to_string(l);
      b.floats(g + "/key", {2, 64, 64}, v);
      b.floats(g + "/value", {2, 64, 64}, v);
    }
  }
  auto dump = Dump::open(path_);
  ASSERT_TRUE(dump) << dump.status().message();
  ASSERT_TRUE((*dump)->read(0, TensorKind::Key));
  const auto size = std::filesystem::file_size(path_);
  std::filesystem::resize_file(path_, size / 2);  // layers 2 and 3 are now past the end
  for (int layer : {3, 0}) {
    auto t = (*dump)->read(layer, TensorKind::Value);
    ASSERT_FALSE(t) << "layer " << layer << " read from a truncated file";
    EXPECT_EQ(t.status().code(), StatusCode::IoError);
    EXPECT_NE(t.status().message().find("the file shrank from " + std::to_string(size) + " to " +
                                        std::to_string(size / 2) + " bytes while it was open"),
              std::string::npos)
        << t.status().message();
  }
}

}  // namespace
}  // namespace kvscope
