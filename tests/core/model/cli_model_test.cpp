// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli record` and `kvscope-cli e2e` through files, on stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>

#include "core/io/dump.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

#define REQUIRE_STORIES()                                                                   \
  if (test::storiesModel().empty())                                                        \
  GTEST_SKIP() << "../shared/models/stories260K.bin is absent: the real-model tests need it"

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// A llama2.c tokenizer with pieces "<t0>", "<t1>", … for `vocab` tokens.
std::string writeTokenizer(const test::TempDir& dir, int vocab) {
  const std::string path = dir.file("tokenizer.bin");
  std::ofstream out(path, std::ios::binary);
  int32_t maxLen = 8;
  out.write(reinterpret_cast<const char*>(&maxLen), 4);
  for (int i = 0; i < vocab; ++i) {
    const std::string piece = "<t" + std::to_string(i) + ">";
    float score = 0;
    auto len = static_cast<int32_t>(piece.size());
    out.write(reinterpret_cast<const char*>(&score), 4).write(reinterpret_cast<const char*>(&len), 4);
    out.write(piece.data(), len);
  }
  return path;
}

TEST(CliRecord, WritesACanonicalDumpThatReadsBackAsRecorded) {
  REQUIRE_STORIES();
  test::TempDir dir;
  const std::string model = test::storiesModel().string(), out = dir.file("s.h5");
  auto r = test::runCli("record " + quoted(model) + " --out " + quoted(out) +
                        " --steps 40 --seed 5 --temperature 0.7 --prompt-tokens 403,407 --tokenizer " +
                        quoted(writeTokenizer(dir, 512)));
  ASSERT_EQ(r.exitCode, 0) << r.err;

  auto info = test::runCli("info --json " + quoted(out));
  ASSERT_EQ(info.exitCode, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["layers"], 5);
  EXPECT_EQ(j["kv_heads"], 4);
  EXPECT_EQ(j["heads"], 8);
  EXPECT_EQ(j["tokens"], 40);
  EXPECT_EQ(j["queries"], 40);
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["rope_style"], "interleaved");
  EXPECT_EQ(j["rope_theta"], 10000.0);
  EXPECT_EQ(j["model"], "stories260K");
  EXPECT_EQ(j["model_path"], test::storiesModel().lexically_normal().string());
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_TRUE(j["has_key_pre_rope"]);
  EXPECT_TRUE(j["has_token_text"]);


  // The file holds exactly what recordDump with the same options writes.
  auto m = Model::load(model, writeTokenizer(dir, 512));
  ASSERT_TRUE(m);
  RecordOptions o;
  o.tokens = {1, 403, 407};
  o.steps = 40;
  o.seed = 5;
  o.temperature = 0.7;
  o.logits = true;
  const std::string again = dir.file("again.h5");
  auto rec = recordDump(*m, o, again);
  ASSERT_TRUE(rec) << rec.status().message();
  auto dump = Dump::open(out);
  ASSERT_TRUE(dump) << dump.status().message();
  auto same = Dump::open(again);
  ASSERT_TRUE(same) << same.status().message();
  auto tokens = (*dump)->tokens();
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 40u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ((*tokens)[i], rec->tokens[i]);
  auto text = (*dump)->tokenText();
  ASSERT_TRUE(text);
  EXPECT_EQ((*text)[0], "<t1>");
  EXPECT_EQ((*text)[1], "<t403>");
  EXPECT_FALSE((*dump)->info().hasLogits) << "logits only with --logits";
  for (int l = 0; l < 5; ++l) {
    for (TensorKind k : {TensorKind::Key, TensorKind::KeyPreRope, TensorKind::Value, TensorKind::Query})
      EXPECT_EQ((*dump)->read(l, k)->data, (*same)->read(l, k)->data) << l;
  }
  // --logits stores them; the tensors stay the same.
  const std::string withLogits = dir.file("logits.h5");
  ASSERT_EQ(test::runCli("record " + quoted(model) + " --out " + quoted(withLogits) +
                         " --steps 40 --seed 5 --temperature 0.7 --prompt-tokens 403,407 --logits")
                .exitCode,
            0);
  auto l = Dump::open(withLogits);
  ASSERT_TRUE(l);
  EXPECT_EQ(*(*l)->logits(), *(*same)->logits());
}

TEST(CliRecord, TakesTokensFromTheCommandLineOrAFileExactly) {
  REQUIRE_STORIES();
  test::TempDir dir;
  const std::string model = quoted(test::storiesModel().string());
  const std::string out = dir.file("t.h5"), file = dir.file("ids.txt");
  std::ofstream(file) << "5 6\n7,8\n";
  ASSERT_EQ(test::runCli("record " + model + " --out " + quoted(out) + " --tokens-file " + quoted(file)).exitCode, 0);
  auto d = Dump::open(out);
  ASSERT_TRUE(d);
  EXPECT_EQ(*(*d)->tokens(), (std::vector<int64_t>{5, 6, 7, 8})) << "exactly those ids: no BOS added, no sampling";
  auto more = test::runCli("record " + model + " --out " + quoted(out) + " --tokens 5,6 --steps 10");
  ASSERT_EQ(more.exitCode, 0) << more.err;
  EXPECT_NE(more.out.find("10 tokens (8 sampled)"), std::string::npos) << more.out;
  auto text = test::runCli("record " + model + " --out " + quoted(out) + " --prompt 'Once upon a time'");
  EXPECT_EQ(text.exitCode, 2);
  EXPECT_NE(text.err.find("no tokenizer"), std::string::npos) << text.err;
  auto two = test::runCli("record " + model + " --out " + quoted(out) + " --tokens 1 --prompt x");
  EXPECT_EQ(two.exitCode, 2);
  auto shortSteps = test::runCli("record " + model + " --out " + quoted(out) + " --tokens 1,2,3 --steps 2");
  EXPECT_EQ(shortSteps.exitCode, 2);
  EXPECT_NE(shortSteps.err.find("already has 3 tokens"), std::string::npos) << shortSteps.err;
}

TEST(CliRecord, BadInputsFailWithExitStatus2AndAReason) {
  REQUIRE_STORIES();
  test::TempDir dir;
  const std::string model = quoted(test::storiesModel().string()), out = quoted(dir.file("x.h5"));
  auto tooLong = test::runCli("record " + model + " --out " + out + " --steps 600");
  EXPECT_EQ(tooLong.exitCode, 2);
  EXPECT_NE(tooLong.err.find("context length 512"), std::string::npos) << tooLong.err;
  auto badPrompt = test::runCli("record " + model + " --out " + out + " --prompt-tokens 1,x");
  EXPECT_EQ(badPrompt.exitCode, 2);
  EXPECT_NE(badPrompt.err.find("--prompt-tokens"), std::string::npos) << badPrompt.err;
  auto badTokenizer = test::runCli("record " + model + " --out " + out + " --tokenizer " +
                                   quoted(writeTokenizer(dir, 100)));
  EXPECT_EQ(badTokenizer.exitCode, 2);
  EXPECT_NE(badTokenizer.err.find("tokenizer"), std::string::npos) << badTokenizer.err;
  const std::string junk = dir.file("junk.bin");
  std::ofstream(junk) << "not a model";
  auto notModel = test::runCli("record " + quoted(junk) + " --out " + out);
  EXPECT_EQ(notModel.exitCode, 2);
  EXPECT_NE(notModel.err.find("junk.bin"), std::string::npos) << notModel.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.h5"))) << "no dump is written after a failure";
}

TEST(CliE2e, ReportsJsonForSpecsPresetsAndSweeps) {
  REQUIRE_STORIES();
  test::TempDir dir;
  const std::string model = quoted(test::storiesModel().string()), dump = quoted(dir.file("s.h5"));
  ASSERT_EQ(test::runCli("record " + model + " --out " + dump + " --steps 64 --seed 1 --temperature 1").exitCode, 0);

  auto one = test::runCli("e2e " + model + " " + dump + " --key q8_0 --value q8_0 --json -");
  ASSERT_EQ(one.exitCode, 0) << one.err;
  auto j = nlohmann::json::parse(one.out);
  EXPECT_LT(j["summary"]["kl_mean"].get<double>(), 1e-2);
  EXPECT_GT(j["summary"]["kl_mean"].get<double>(), 0.0);
  EXPECT_EQ(j["positions"].size(), 64u);
  EXPECT_EQ(j["summary"]["positions_scored"], 63);
  EXPECT_TRUE(j["dump_logits_max_abs_diff"].is_null()) << "no /logits without --logits";
  EXPECT_EQ(j["dump_kv_max_abs_diff"], 0.0);
  EXPECT_EQ(one.err.find("warning"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("e2e: layer 5 of 5"), std::string::npos) << "progress per layer on stderr: " << one.err;

  auto preset = test::runCli("e2e " + model + " " + dump + " --preset kivi-2");
  ASSERT_EQ(preset.exitCode, 0) << preset.err;
  EXPECT_NE(preset.out.find("Mean PPL(Q)/PPL(base)"), std::string::npos) << preset.out;
  EXPECT_NE(preset.out.find("RMS Δp"), std::string::npos) << preset.out;

  const std::string jsonFile = dir.file("sweep.json");
  auto sweep = test::runCli("e2e " + model + " " + dump + " --sweep 'none:none;int8:int8;int2:int2' --json " +
                            quoted(jsonFile));
  ASSERT_EQ(sweep.exitCode, 0) << sweep.err;
  EXPECT_NE(sweep.out.find("ppl_ratio"), std::string::npos) << sweep.out;
  std::ifstream in(jsonFile);
  auto s = nlohmann::json::parse(in);
  ASSERT_EQ(s["results"].size(), 3u);
  EXPECT_EQ(s["results"][0]["summary"]["kl_mean"], 0.0);
  EXPECT_LT(s["results"][1]["summary"]["kl_mean"].get<double>(), s["results"][2]["summary"]["kl_mean"].get<double>());

  // An engine string resolves for the model's shape: at stories260K's D = 8 llama.cpp refuses a
  // q8_0 cache (src/llama-context.cpp llama_init_from_model: block size 32 does not divide D), and
  // stores bf16 as it is.
  auto refused = test::runCli("e2e " + model + " " + dump + " --engine 'llama.cpp -ctk q8_0 -ctv q8_0' --json -");
  EXPECT_EQ(refused.exitCode, 2) << refused.err;
  EXPECT_NE(refused.err.find("does not divide n_embd_head_k=8"), std::string::npos) << refused.err;
  auto engine = test::runCli("e2e " + model + " " + dump + " --engine 'llama.cpp -ctk bf16 -ctv bf16' --json -");
  ASSERT_EQ(engine.exitCode, 0) << engine.err;
  auto e = nlohmann::json::parse(engine.out);
  EXPECT_EQ(e["engine"], "llama.cpp -ctk bf16 -ctv bf16");
  EXPECT_NE(engine.err.find("bf16 is not a quantized type"), std::string::npos) << engine.err;
  auto explain = test::runCli("e2e " + model + " " + dump + " --engine 'llama.cpp -ctk bf16' --explain");
  ASSERT_EQ(explain.exitCode, 0) << explain.err;
  EXPECT_NE(explain.out.find("key:   bf16\n"), std::string::npos) << explain.out;
  EXPECT_EQ(explain.out.find("PPL"), std::string::npos);  // nothing was replayed

  auto both = test::runCli("e2e " + model + " " + dump + " --preset kivi-2 --key int4 --value int4");
  EXPECT_EQ(both.exitCode, 2);
  auto engineAndPreset = test::runCli("e2e " + model + " " + dump + " --preset kivi-2 --engine llama.cpp");
  EXPECT_EQ(engineAndPreset.exitCode, 2);
  auto badSpec = test::runCli("e2e " + model + " " + dump + " --key int9 --value int4");
  EXPECT_EQ(badSpec.exitCode, 2);
  EXPECT_NE(badSpec.err.find("--key"), std::string::npos) << badSpec.err;
}

TEST(CliE2e, WarnsWhenTheDumpCameFromAnotherModel) {
  REQUIRE_STORIES();
  test::TempDir dir;
  // A dump recorded from a generated model with stories260K's shapes but other weights.
  const std::string other = dir.file("other.bin");
  {
    std::ifstream src(test::storiesModel(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    for (size_t i = 28 + 4 * 512 * 64; i + 4 <= bytes.size(); i += 4 * 97) bytes[i + 3] ^= 0x01;  // perturb weights
    std::ofstream(other, std::ios::binary) << bytes;
  }
  const std::string dump = quoted(dir.file("o.h5"));
  ASSERT_EQ(test::runCli("record " + quoted(other) + " --out " + dump + " --steps 16").exitCode, 0);
  auto r = test::runCli("e2e " + quoted(test::storiesModel().string()) + " " + dump + " --key none --value none");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("another model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvscope
