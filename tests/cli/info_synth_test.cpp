// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>
#include <hdf5.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/io/dump_writer.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using test::runCli;

std::string q(const std::string& s) { return "'" + s + "'"; }

void expectClean(const test::RunResult& r) {
  EXPECT_EQ(r.err.find("HDF5-DIAG"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("HDF5-DIAG"), std::string::npos) << r.out;
}

TEST(CliSynth, DefaultsWriteTheSampleShapeAndInfoReportsItAsJson) {
  test::TempDir dir;
  const std::string dump = dir.file("s.h5");
  auto r = runCli("synth " + q(dump));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  expectClean(r);
  ASSERT_TRUE(fs::exists(dump));
  r = runCli("info " + q(dump) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  expectClean(r);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "synthetic-llama");
  EXPECT_EQ(j["layers"], 4);
  EXPECT_EQ(j["kv_heads"], 2);
  EXPECT_EQ(j["heads"], 8);
  EXPECT_EQ(j["tokens"], 256);
  EXPECT_EQ(j["queries"], 32);
  EXPECT_EQ(j["head_dim"], 64);
  EXPECT_EQ(j["sequences"], 1);
  EXPECT_EQ(j["dtype"], "float16");
  EXPECT_EQ(j["has_query"], true);
  EXPECT_EQ(j["has_key_pre_rope"], true);
  EXPECT_EQ(j["has_tokens"], true);
  EXPECT_EQ(j["has_token_text"], true);
  EXPECT_EQ(j["has_logits"], false);
  EXPECT_EQ(j["rope_style"], "half");
  EXPECT_EQ(j["rope_theta"], 10000.0);
  EXPECT_EQ(j["softmax_scale"], 0.125);
  EXPECT_EQ(j["bytes_per_token_fp16"], 2 * 4 * 2 * 64 * 2);  // K+V, L, KVH, D, 2 bytes
  EXPECT_EQ(j["bytes_total_fp16"], 2 * 4 * 2 * 64 * 2 * 256);
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_TRUE(j["warnings"].empty());
}

TEST(CliSynth, OptionsShapeTheDump) {
  test::TempDir dir;
  const std::string dump = dir.file("o.h5");
  auto r =
      runCli("synth " + q(dump) +
             " --layers 3 --kv-heads 1 --heads 2 --tokens 16 --queries 4 --head-dim 8 --sequences 2"
             " --dtype fp32 --profile bias-outlier --model tiny --seed 9 --rope-style interleaved");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = runCli("info " + q(dump) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"], 3);
  EXPECT_EQ(j["kv_heads"], 1);
  EXPECT_EQ(j["heads"], 2);
  EXPECT_EQ(j["tokens"], 16);
  EXPECT_EQ(j["queries"], 4);
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["sequences"], 2);
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["rope_style"], "interleaved");
}

TEST(CliSynth, BadArgumentsExitTwoAndWriteNothing) {
  test::TempDir dir;
  const std::string dump = dir.file("bad.h5");
  for (const std::string& args :
       {std::string("--profile nope"), std::string("--dtype bf16"),
        std::string("--heads 3 --kv-heads 2"), std::string("--queries 300"),
        std::string("--head-dim 7"), std::string("--layers 0"), std::string("--rope-style neox"),
        std::string("--tokens many")}) {
    auto r = runCli("synth " + q(dump) + " " + args);
    EXPECT_EQ(r.exitCode, 2) << args;
    EXPECT_EQ(r.err.rfind("kvscope-cli: ", 0), 0u) << args << ": " << r.err;
    expectClean(r);
  }
  auto r = runCli("synth " + q(dir.file("no/such/dir/x.h5")));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("no/such/dir"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(CliInfo, TextReportNamesEveryFigure) {
  test::TempDir dir;
  const std::string dump = dir.file("t.h5");
  ASSERT_EQ(runCli("synth " + q(dump) + " --layers 2 --tokens 32 --queries 8").exitCode, 0);
  auto r = runCli("info " + q(dump));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  expectClean(r);
  for (const char* needle :
       {"model:", "synthetic-llama", "layers:", "kv heads:", "query heads:", "tokens:", "queries:",
        "head dim:", "sequences:", "element type:", "float16", "key_pre_rope", "token_text",
        "fp16 KV size:", "1024 bytes per token", "warnings:"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(CliInfo, NotHdf5ExitsTwoNamingTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << "hello";
  auto r = runCli("info " + q(path));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err.rfind("kvscope-cli: " + path + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("not an HDF5 file"), std::string::npos) << r.err;
  expectClean(r);
  r = runCli("info " + q(dir.file("absent.h5")));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("absent.h5"), std::string::npos);
}

TEST(CliInfo, MissingValueExitsTwoNamingTheDataset) {
  test::TempDir dir;
  const std::string path = dir.file("novalue.h5");
  {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "kvdump_version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int one = 1;
    H5Awrite(a, H5T_NATIVE_INT, &one);
    H5Aclose(a);
    H5Sclose(sp);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hsize_t dims[3] = {1, 2, 8};
    sp = H5Screate_simple(3, dims, nullptr);
    hid_t ds = H5Dcreate2(f, "/layers/0/key", H5T_IEEE_F32LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(lcpl);
    H5Fclose(f);
  }
  auto r = runCli("info " + q(path) + " --json");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err, "kvscope-cli: " + path + ": /layers/0/value: missing\n");
  EXPECT_TRUE(r.out.empty());
  expectClean(r);
}

TEST(CliInfo, ScanReportsNonFiniteValuesAsWarnings) {
  test::TempDir dir;
  const std::string path = dir.file("nan.h5");
  DumpWriterOptions o;
  o.layers = 2;
  o.kvHeads = 1;
  o.tokens = 3;
  o.headDim = 2;
  o.dtype = DiskType::Float32;
  auto w = DumpWriter::create(path, o);
  ASSERT_TRUE(w);
  Tensor3 ok(1, 3, 2, 1.0f), bad(1, 3, 2, 1.0f);
  bad.at(0, 2, 1) = std::numeric_limits<float>::quiet_NaN();
  bad.at(0, 1, 0) = std::numeric_limits<float>::infinity();
  ASSERT_TRUE((*w)->write(0, TensorKind::Key, ok));
  ASSERT_TRUE((*w)->write(0, TensorKind::Value, ok));
  ASSERT_TRUE((*w)->write(1, TensorKind::Key, ok));
  ASSERT_TRUE((*w)->write(1, TensorKind::Value, bad));
  ASSERT_TRUE((*w)->finish());
  w->reset();

  auto r = runCli("info " + q(path) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["warnings"].empty());  // nothing read without --scan
  r = runCli("info " + q(path) + " --json --scan");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["warnings"].size(), 1u);
  const std::string warning = j["warnings"][0];
  EXPECT_NE(warning.find("/layers/1/value"), std::string::npos) << warning;
  EXPECT_NE(warning.find("1 NaN, 1 Inf"), std::string::npos) << warning;
  EXPECT_NE(warning.find("token 1, channel 0"), std::string::npos) << warning;
  ASSERT_EQ(j["scan"].size(), 4u);
  EXPECT_EQ(j["scan"][3]["tensor"], "value");
  EXPECT_EQ(j["scan"][3]["nan"], 1);
  EXPECT_EQ(j["scan"][3]["inf"], 1);
  r = runCli("info " + q(path) + " --scan");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("warning:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 NaN, 1 Inf"), std::string::npos) << r.out;
}

TEST(CliInfo, MappingFileReadsANonCanonicalFile) {
  test::TempDir dir;
  const std::string path = dir.file("hf.h5");
  {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hsize_t dims[5] = {3, 1, 2, 7, 8};  // layer, batch, head, token, dim
    hid_t sp = H5Screate_simple(5, dims, nullptr);
    std::vector<float> zeros(3 * 2 * 7 * 8, 0.5f);
    for (const char* name : {"/past_key_values/key", "/past_key_values/value"}) {
      hid_t ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
      H5Dclose(ds);
    }
    H5Sclose(sp);
    H5Pclose(lcpl);
    H5Fclose(f);
  }
  const std::string map = dir.file("map.json");
  std::ofstream(map)
      << R"({"key": {"path": "/past_key_values/key", "axes": "layer,batch,head,token,dim"},
                           "value": {"path": "/past_key_values/value", "axes": "layer,batch,head,token,dim"},
                           "model": "hf-model"})";
  auto r = runCli("info " + q(path) + " --json");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("kvdump_version"), std::string::npos) << r.err;
  r = runCli("info " + q(path) + " --mapping " + q(map) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  expectClean(r);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"], 3);
  EXPECT_EQ(j["kv_heads"], 2);
  EXPECT_EQ(j["tokens"], 7);
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["model"], "hf-model");
  EXPECT_EQ(j["canonical"], false);

  const std::string badMap = dir.file("bad-map.json");
  std::ofstream(badMap)
      << R"({"key": {"path": "/past_key_values/k", "axes": "layer,batch,head,token,dim"},
                              "value": {"path": "/past_key_values/value", "axes": "layer,batch,head,token,dim"}})";
  r = runCli("info " + q(path) + " --mapping " + q(badMap));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("/past_key_values/k"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad-map.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("key.path"), std::string::npos) << r.err;
  expectClean(r);
}

TEST(CliInfo, ExternalLinksNeedAllowExternal) {
  test::TempDir dir;
  const std::string dump = dir.file("s.h5");
  ASSERT_EQ(runCli("synth " + q(dump) + " --layers 1 --tokens 8 --queries 2 -q").exitCode, 0);
  const std::string linked = dir.file("linked.h5");
  {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fcreate(linked.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "kvdump_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int64_t one = 1;
    H5Awrite(a, H5T_NATIVE_INT64, &one);
    H5Aclose(a);
    H5Sclose(sp);
    H5Lcreate_external(dump.c_str(), "/layers", f, "layers", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
  }
  auto r = runCli("info " + q(linked));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("external link"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/layers"), std::string::npos) << r.err;
  expectClean(r);
  r = runCli("info " + q(linked) + " --allow-external --json");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  expectClean(r);
}

}  // namespace
}  // namespace kvscope
