// SPDX-License-Identifier: GPL-3.0-or-later
// Replays the committed fuzz regression corpus (tests/fuzz/regressions/<target>/*) through the
// same entry points the libFuzzer targets use, in the normal build, so CI guards every input
// that once broke something. Also runs small deterministic mutation loops over spec strings
// and mappings, so the parsers are exercised without clang or libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tests/core/reliability/hostile_corpus.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {
namespace fs = std::filesystem;

using Entry = std::string (*)(const uint8_t*, size_t);

std::string run(Entry entry, const std::string& bytes) {
  return entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

/// Runs every file of regressions/<target>; returns how many there were.
int replay(const std::string& target, Entry entry) {
  const fs::path dir = fs::path(KVSCOPE_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / target;
  int n = 0;
  if (!fs::is_directory(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string().front() == '.') continue;
    if (e.path().extension() == ".md") continue;  // notes beside the inputs
    SCOPED_TRACE(e.path().string());
    EXPECT_EQ(run(entry, test::hostile::slurpBytes(e.path().string())), "") << e.path();
    ++n;
  }
  return n;
}

TEST(FuzzRegressions, DumpInputsAreHandled) {
  std::printf("[ replayed ] %d dump inputs\n", replay("dump", fuzz::fuzzDump));
}

TEST(FuzzRegressions, MappingInputsAreHandled) {
  std::printf("[ replayed ] %d mapping inputs\n", replay("mapping", fuzz::fuzzMapping));
}

TEST(FuzzRegressions, SpecInputsAreHandled) {
  std::printf("[ replayed ] %d spec inputs\n", replay("spec", fuzz::fuzzSpec));
}

TEST(FuzzRegressions, EngineInputsAreHandled) {
  std::printf("[ replayed ] %d engine inputs\n", replay("engine", fuzz::fuzzEngine));
}

TEST(FuzzRegressions, GgufInputsAreHandled) {
  std::printf("[ replayed ] %d gguf inputs\n", replay("gguf", fuzz::fuzzGguf));
}

TEST(FuzzRegressions, SafetensorsInputsAreHandled) {
  std::printf("[ replayed ] %d safetensors inputs\n", replay("safetensors", fuzz::fuzzSafetensors));
}

TEST(FuzzRegressions, TokenizerInputsAreHandled) {
  std::printf("[ replayed ] %d tokenizer inputs\n", replay("tokenize", fuzz::fuzzTokenizer));
}

// The tokenizer target's properties hold for good input, and random bytes keep them (mode byte,
// then text or file): invalid UTF-8 refused at its offset, the tokens spell the text again.
TEST(FuzzEntries, TokenizerInputsKeepEveryProperty) {
  const std::string text = std::string(fuzz::kFuzzText);
  for (char mode : {'\x00', '\x01', '\x05', '\x09', '\x0d', '\x11'})
    EXPECT_EQ(run(fuzz::fuzzTokenizer, std::string(1, mode) + text), "") << int(mode);
  EXPECT_EQ(run(fuzz::fuzzTokenizer, std::string("\x03gpt2\ngpt-2\na\nb\nab\nm a b\nc <s>")), "");
  EXPECT_EQ(run(fuzz::fuzzTokenizer, std::string("\x03llama\n\n<unk>\n<s>\n</s>\n\xE2\x96\x81" "a\nu <t>")), "");
  EXPECT_EQ(run(fuzz::fuzzTokenizer, std::string("\x02") + R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
      "merges": ["a b"], "byte_fallback": true}, "pre_tokenizer": {"type": "Metaspace", "replacement": "_"},
      "added_tokens": [{"id": 3, "content": "<s>", "special": true, "normalized": false}]})"), "");
  std::mt19937 rng(28);
  const std::string alphabet = "ab lo\n\t'S1\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80\xC2\x85<|>s\xFF\x80";
  for (int i = 0; i < 3000; ++i) {
    std::string s(1, static_cast<char>(rng() % 2 + 4 * (rng() % 5)));  // llama or gpt2, each pre-tokenizer
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(run(fuzz::fuzzTokenizer, s), "") << "input: " << s;
  }
}

TEST(FuzzEntries, EngineStringsPassEveryProperty) {
  // Accepted and refused strings alike: the property is about how each is handled.
  for (const char* text : {"llama.cpp", "llama.cpp -ctk q4_0 -ctv q8_0", "llama-server --cache-type-k=q5_1 -fa on",
                           "LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk iq4_nl", "llama.cpp -m 'a b' -c 4096 -ctk f32",
                           "llama.cpp -fa off -ctv q4_0", "llama.cpp -ctk q3_K", "vllm", "", "'", "A=1", "llama.cpp -ctk"})
    EXPECT_EQ(run(fuzz::fuzzEngine, text), "") << text;
}

TEST(FuzzEntries, ValidInputsPassEveryProperty) {
  // The properties themselves must hold for good input, or the fuzzers report noise.
  test::TempDir dir;
  const std::string dump = dir.file("valid.h5");
  ASSERT_TRUE(test::hostile::writeDump(dump, {}));
  const std::string bytes = test::hostile::slurpBytes(dump);
  EXPECT_EQ(run(fuzz::fuzzDump, bytes), "");
  // The in-memory file really opens (a fuzzer whose every input fails to open tests nothing).
  fuzz::MemoryFile memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto opened = Dump::open(memory.path());
  ASSERT_TRUE(opened.hasValue()) << opened.status().message();
  EXPECT_EQ((*opened)->info().layers, 2);
  EXPECT_EQ(run(fuzz::fuzzMapping, R"({"key": {"path": "/pkv/key", "axes": "layer,batch,head,token,dim"},
                                      "value": {"path": "/layers/{layer}/v", "axes": ["head", "token", "dim"]},
                                      "rope_theta": 500000, "rope_style": "interleaved"})"),
            "");
  for (const char* spec : {"int4", "int2,axis=channel,group=32,residual=128", "fp8_e4m3,unitscale",
                           "nf4", "q4_0", "int4,sym,clip=0.99", "int3,prerope,axis=channel,outliers=0.01,sinks=1",
                           "int4,rot=hadamard,axis=token,group=128", "mxfp4", "nvfp4", "fp16", "none",
                           "q4_0;first2+last2:q8_0", "int4;0-2:int8,sym;last1:none", "int4;9:int8"})
    EXPECT_EQ(run(fuzz::fuzzSpec, spec), "") << spec;
}

TEST(FuzzEntries, BrokenInputsAreRefusedWithAMessage) {
  // fuzzSpec and fuzzMapping return "" for a clean refusal; these inputs must be refused and the
  // refusal must explain itself (non-empty, naming the mapping's origin).
  for (const char* bad : {"", ",", "int", "int0", "int99", "int4,group=-1", "int4,axis=", "int4,,",
                          "int4,clip=1.5", "int4,clip=nan", "int4,outliers=inf", "fp8_e4m3,sym",
                          "int4,group=99999999999999999999", "int4,sinks=-3", "\xff\xfe"}) {
    auto spec = parseSpec(bad);
    EXPECT_FALSE(spec.hasValue()) << "accepted '" << bad << "' as " << (spec ? toString(*spec) : "");
    if (!spec) {
      EXPECT_FALSE(spec.status().message().empty()) << bad;
    }
  }
  for (const char* bad : {"", "{", "[]", "null", R"({"key": 1})", R"({"key": {"path": "/k"}})",
                          R"({"key": {"path": "/k", "axes": "head,token"}, "value": {"path": "/v", "axes": "head,token,dim"}})"}) {
    auto m = parseMapping(bad, fuzz::kOrigin);
    ASSERT_FALSE(m.hasValue()) << bad;
    EXPECT_NE(m.status().message().find(fuzz::kOrigin), std::string::npos) << m.status().message();
  }
}

// Deterministic mutations (byte flips, inserts, deletes, splices of known tokens) of good spec
// strings: nothing crashes, every rejection has a message, every acceptance round-trips.
TEST(FuzzEntries, MutatedSpecStringsNeverBreakTheParser) {
  const std::vector<std::string> seeds = {
      "int4", "int2,axis=channel,group=32,residual=128", "fp8_e5m2,scale=bf16", "nf4,group=64,clip=mse",
      "int8,sym,axis=head", "q8_0", "iq4_nl", "int3,prerope,axis=channel,outliers=0.01,sinks=1",
      "int4,rot=hadamard,axis=token,group=128", "bf16", "nvfp4,sinks=4", "q4_0;first2+last2:q8_0",
      "int4;1-3:int8;last1:none"};
  const std::vector<std::string> pieces = {",", "=", "int", "axis", "group", "clip", "sym", "asym", "mse",
                                           "0", "-1", "1e308", "nan", "0.5", "tensor", "token", "prerope",
                                           "scale=fp32", "residual=", "outliers=1", "9999999999", " ",
                                           ";", ":", "+", "first", "last", ";2:"};
  std::mt19937 rng(20261129);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.insert(at, pieces[rng() % pieces.size()]); break;
        case 2: if (at < s.size()) s.erase(at, 1 + rng() % 3); break;
        default: s.insert(at, 1, static_cast<char>(rng() % 256)); break;
      }
    }
    const std::string bad = run(fuzz::fuzzSpec, s);
    ASSERT_EQ(bad, "") << "input: '" << s << "'";
    (parsePlan(s) ? accepted : refused)++;
  }
  std::printf("[ mutated  ] 20000 spec strings: %d accepted, %d refused\n", accepted, refused);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// The same for engine strings (tests/fuzz/engine.dict's words): every refusal explains itself,
// every acceptance gives specs that parse and validate at each shape.
TEST(FuzzEntries, MutatedEngineStringsKeepEveryProperty) {
  const std::vector<std::string> seeds = {"llama.cpp -ctk q4_0 -ctv q8_0", "llama-server --cache-type-k=q5_1 -fa on",
                                          "LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk iq4_nl -ctv q4_1",
                                          "llama-cli -m 'a b.gguf' -c 4096 -ngl 99 -ctk f32 -ctv bf16"};
  const std::vector<std::string> pieces = {" ", "=", "'", "\"", "-ctk", "-ctv", "--cache-type-v=", "-fa", "off",
                                           "auto", "-1", "q4_0", "q8_0", "bf16", "q3_K", "LLAMA_ATTN_ROT_DISABLE=",
                                           "LLAMA_ARG_CACHE_TYPE_K=", "llama.cpp", "-m", "0", "9999999999"};
  std::mt19937 rng(20261202);
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.insert(at, pieces[rng() % pieces.size()]); break;
        case 2: if (at < s.size()) s.erase(at, 1 + rng() % 3); break;
        default: s.insert(at, 1, static_cast<char>(rng() % 256)); break;
      }
    }
    ASSERT_EQ(run(fuzz::fuzzEngine, s), "") << "input: '" << s << "'";
    if (resolveEngine(s, {}).hasValue()) ++accepted;
  }
  std::printf("[ mutated  ] 5000 engine strings: %d accepted\n", accepted);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 5000);
}

TEST(FuzzEntries, MutatedMappingsNeverBreakTheParser) {
  const std::string seed = R"({"key": {"path": "/past_key_values/key", "axes": "layer,batch,head,token,dim"},
 "value": {"path": "/past_key_values/value", "axes": ["layer", "batch", "head", "token", "dim"]},
 "query": {"path": "/q/{layer}", "axes": "head,token,dim"}, "layers": 4, "model": "m",
 "rope_theta": 10000.0, "rope_style": "half", "softmax_scale": 0.125})";
  const std::vector<std::string> pieces = {"{", "}", "[", "]", "\"", ",", ":", "null", "true", "-1", "1e999",
                                           "\"layer\"", "{layer}", "\\u0000", "\"key\"", "0.0", "\"axes\""};
  std::mt19937 rng(1129);
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string s = seed;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0: if (at < s.size()) s[at] = static_cast<char>(rng() % 128); break;
        case 1: s.insert(at, pieces[rng() % pieces.size()]); break;
        default: if (at < s.size()) s.erase(at, 1 + rng() % 8); break;
      }
    }
    ASSERT_EQ(run(fuzz::fuzzMapping, s), "") << "input: " << s;
    if (parseMapping(s, fuzz::kOrigin)) ++accepted;
  }
  std::printf("[ mutated  ] 5000 mappings: %d accepted\n", accepted);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace kvscope
