// SPDX-License-Identifier: GPL-3.0-or-later
// Engine strings (core/engine/engine.h): llama.cpp's flags as common/arg.cpp parses them and what
// its KV cache stores for them (src/llama-kv-cache.cpp after PR #21038; docs/engines.md).
#include <gtest/gtest.h>

#include <string>

#include "core/engine/engine.h"
#include "core/engine/llamacpp.h"

namespace kvscope {
namespace {

const KvShape kD128{128, 4, 2};
const KvShape kD96{96, 4, 2};

bool hasNote(const ResolvedKv& r, const std::string& part) {
  for (const std::string& n : r.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string errorOf(std::string_view text, const KvShape& shape = kD128) {
  auto r = resolveEngine(text, shape);
  EXPECT_FALSE(r.hasValue()) << text;
  if (r.hasValue()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::InvalidArgument) << text;
  return r.status().message();
}

TEST(EngineSplit, EnvironmentNameAndQuotedWords) {
  auto a = splitEngineString("  LLAMA_ATTN_ROT_DISABLE=1 A_B=x  llama.cpp -m 'my model.gguf' -ctk \"q4_0\"  ");
  ASSERT_TRUE(a.hasValue()) << a.status().message();
  ASSERT_EQ(a->env.size(), 2u);
  EXPECT_EQ(a->env[0].first, "LLAMA_ATTN_ROT_DISABLE");
  EXPECT_EQ(a->env[0].second, "1");
  EXPECT_EQ(a->env[1].first, "A_B");
  EXPECT_EQ(a->name, "llama.cpp");
  ASSERT_EQ(a->words.size(), 4u);
  EXPECT_EQ(a->words[1], "my model.gguf");
  EXPECT_EQ(a->words[3], "q4_0");
}

TEST(EngineSplit, EmptyUnclosedAndNamelessStringsAreRefused) {
  EXPECT_NE(errorOf("").find("no engine name"), std::string::npos);
  EXPECT_NE(errorOf("LLAMA_ATTN_ROT_DISABLE=1").find("no engine name"), std::string::npos);
  EXPECT_NE(errorOf("llama.cpp -ctk 'q4_0").find("unclosed ' quote"), std::string::npos);
}

TEST(Engines, UnknownEngineListsTheKnownOnes) {
  const std::string e = errorOf("exllamav2 --cache-8bit");
  EXPECT_EQ(e, "unknown engine 'exllamav2' (known engines: llama.cpp, vllm, sglang, lmdeploy, transformers, trtllm)");
  EXPECT_EQ(findEngine("llama-server"), findEngine("llama.cpp"));
  EXPECT_EQ(findEngine(""), nullptr);
}

// common/arg.cpp: kv_cache_types = {F32, F16, BF16, Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1}.
TEST(Llamacpp, CacheTypesAreArgCppsListInItsOrder) {
  EXPECT_EQ(llamacppCacheTypeList(), "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1");
  EXPECT_FALSE(isLlamacppQuantized("f16"));
  EXPECT_FALSE(isLlamacppQuantized("bf16"));
  EXPECT_FALSE(isLlamacppQuantized("f32"));
  EXPECT_TRUE(isLlamacppQuantized("iq4_nl"));
  EXPECT_FALSE(isLlamacppQuantized("q3_K"));
}

TEST(Llamacpp, QuantizedTypesRotateWhenDIsAMultipleOf64) {
  auto r = resolveEngine("llama.cpp -ctk q4_0 -ctv q8_0", kD128);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key, "q4_0,rot=hadamard:128");  // build_input_k_rot: the largest power of two dividing 128
  EXPECT_EQ(r->value, "q8_0,rot=hadamard:64");  // build_input_v_rot: always 64
  EXPECT_TRUE(hasNote(*r, "flash attention is auto: llama.cpp turns it on for a quantized V cache"));
  auto d96 = resolveEngine("llama.cpp --cache-type-k=q5_1 --cache-type-v q5_0 -fa on", kD96);
  ASSERT_TRUE(d96.hasValue()) << d96.status().message();
  EXPECT_EQ(d96->key, "q5_1");
  EXPECT_EQ(d96->value, "q5_0");
  EXPECT_TRUE(hasNote(*d96, "D = 96 is not a multiple of 64: llama.cpp does not rotate"));
  auto d64 = resolveEngine("llama-server -ctk iq4_nl -ctv q4_1", {64, 4, 2});
  ASSERT_TRUE(d64.hasValue());
  EXPECT_EQ(d64->key, "iq4_nl,rot=hadamard:64");
  EXPECT_EQ(d64->value, "q4_1,rot=hadamard:64");
}

TEST(Llamacpp, RotationDisabledByTheEnvironmentOnlyForNonZeroIntegers) {
  auto off = resolveEngine("LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk q4_0 -ctv q4_0", kD128);
  ASSERT_TRUE(off.hasValue());
  EXPECT_EQ(off->key, "q4_0");
  EXPECT_EQ(off->value, "q4_0");
  EXPECT_TRUE(hasNote(*off, "LLAMA_ATTN_ROT_DISABLE"));
  // atoi("0") == 0: the rotation stays on.
  auto on = resolveEngine("LLAMA_ATTN_ROT_DISABLE=0 llama.cpp -ctk q4_0", kD128);
  ASSERT_TRUE(on.hasValue());
  EXPECT_EQ(on->key, "q4_0,rot=hadamard:128");
  EXPECT_NE(errorOf("LLAMA_ATTN_ROT_DISABLE=yes llama.cpp").find("atoi"), std::string::npos);
}

TEST(Llamacpp, UnquantizedTypesMapToExactFormatsAndTheDefaultIsF16) {
  auto d = resolveEngine("llama.cpp", kD128);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(d->key, "fp16");
  EXPECT_EQ(d->value, "fp16");
  auto r = resolveEngine("llama.cpp -ctk f32 -ctv bf16", kD128);
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ(r->key, "fp32");  // the dump's values, counted at 4 bytes as llama.cpp stores them
  EXPECT_EQ(r->value, "bf16");
  EXPECT_TRUE(hasNote(*r, "f32 is not a quantized type"));
  // Quantized K with f16 V rotates K only: K and V are decided separately.
  auto k = resolveEngine("llama.cpp -ctk q8_0", kD128);
  ASSERT_TRUE(k.hasValue());
  EXPECT_EQ(k->key, "q8_0,rot=hadamard:128");
  EXPECT_EQ(k->value, "fp16");
}

TEST(Llamacpp, FlagsThatDoNotAffectTheCacheAreIgnoredWithANote) {
  auto r = resolveEngine("llama.cpp -m model.gguf -c 4096 -ngl 99 --no-mmap -ctk q8_0 --temp -1", kD128);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key, "q8_0,rot=hadamard:128");
  EXPECT_TRUE(hasNote(*r, "ignored -m model.gguf: it does not change what the KV cache stores"));
  EXPECT_TRUE(hasNote(*r, "ignored -c 4096"));
  EXPECT_TRUE(hasNote(*r, "ignored -ngl 99"));
  EXPECT_TRUE(hasNote(*r, "ignored --no-mmap"));
  EXPECT_TRUE(hasNote(*r, "ignored --temp -1"));
  auto env = resolveEngine("CUDA_VISIBLE_DEVICES=0 llama.cpp", kD128);
  ASSERT_TRUE(env.hasValue());
  EXPECT_TRUE(hasNote(*env, "ignored CUDA_VISIBLE_DEVICES=0"));
}

TEST(Llamacpp, TheLastOfARepeatedFlagCountsAndFlagsBeatTheEnvironment) {
  auto r = resolveEngine("LLAMA_ARG_CACHE_TYPE_V=q4_0 LLAMA_ARG_CACHE_TYPE_K=q4_0 llama.cpp -ctk q4_0 -ctk q5_0",
                         kD96);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key, "q5_0");
  EXPECT_EQ(r->value, "q4_0");  // from LLAMA_ARG_CACHE_TYPE_V
  EXPECT_TRUE(hasNote(*r, "-ctk given twice"));
}

TEST(Llamacpp, FlashAttentionValuesAndTheQuantizedVRule) {
  for (const char* v : {"on", "enabled", "1", "auto", "-1"}) {
    EXPECT_TRUE(resolveEngine(std::string("llama.cpp -ctv q4_0 -fa ") + v, kD128).hasValue()) << v;
  }
  // A quantized K without flash attention is allowed; a quantized V is not
  // (src/llama-context.cpp, llama_init_from_model).
  EXPECT_TRUE(resolveEngine("llama.cpp -fa off -ctk q4_0", kD128).hasValue());
  const std::string e = errorOf("llama.cpp -fa off -ctv q4_0");
  EXPECT_NE(e.find("llama.cpp: --cache-type-v q4_0 with flash attention off"), std::string::npos) << e;
  EXPECT_NE(errorOf("llama.cpp --flash-attn=0 -ctv q8_0").find("flash attention off"), std::string::npos);
  EXPECT_NE(errorOf("llama.cpp -fa maybe").find("llama.cpp: -fa maybe: llama.cpp accepts on, off or auto"),
            std::string::npos);
}

TEST(Llamacpp, EveryRefusalNamesTheFlagAndWhatIsAccepted) {
  EXPECT_EQ(errorOf("llama.cpp --cache-type-k q3_K"),
            "llama.cpp: --cache-type-k q3_K is not a KV cache type llama.cpp accepts (it accepts f32, f16, "
            "bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)");
  EXPECT_NE(errorOf("llama.cpp -ctv turbo3").find("-ctv turbo3 is not a KV cache type"), std::string::npos);
  EXPECT_NE(errorOf("LLAMA_ARG_CACHE_TYPE_V=q2_K llama.cpp").find("LLAMA_ARG_CACHE_TYPE_V=q2_K is not a KV cache type"),
            std::string::npos);
  EXPECT_NE(errorOf("LLAMA_ARG_FLASH_ATTN=sometimes llama.cpp").find("accepts on, off or auto"), std::string::npos);
  EXPECT_EQ(errorOf("llama.cpp -ctk"),
            "llama.cpp: -ctk needs a value (one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)");
  EXPECT_EQ(errorOf("llama.cpp -fa"), "llama.cpp: -fa needs a value (on, off or auto)");
  EXPECT_NE(errorOf("llama.cpp q4_0").find("'q4_0' is not a flag"), std::string::npos);
}

TEST(Llamacpp, WithoutAShapeTheFlagsAreCheckedAndTheRuleIsNoted) {
  auto r = resolveEngine("llama.cpp -ctk q4_0", {});
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ(r->key, "q4_0");
  EXPECT_TRUE(hasNote(*r, "depends on the dump's head dim"));
  EXPECT_FALSE(resolveEngine("llama.cpp -ctk q3_K", {}).hasValue());
}


// Issue 33: "llama.cpp -ctk=q4_0" was ignored ("ignored -ctk=q4_0"), so every figure was fp16.
// It is read as -ctk q4_0, with a note: llama.cpp's common/arg.cpp (common_params_parse_ex)
// looks argv[i] up whole in its option table and refuses it ("error: invalid argument").
TEST(Llamacpp, TheEqualsSpellingOfShortFlagsIsReadAndNoted) {
  auto r = resolveEngine("llama.cpp -ctk=q4_0 -ctv=q8_0 -fa=on", kD128);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key, "q4_0,rot=hadamard:128");
  EXPECT_EQ(r->value, "q8_0,rot=hadamard:64");
  EXPECT_TRUE(hasNote(*r, "-ctk=q4_0: read as -ctk q4_0; llama.cpp itself refuses the '=' spelling"));
  EXPECT_TRUE(hasNote(*r, "-ctv=q8_0: read as -ctv q8_0"));
  EXPECT_NE(errorOf("llama.cpp -ctk=q3_K").find("-ctk q3_K is not a KV cache type"), std::string::npos);
  EXPECT_NE(errorOf("llama.cpp -fa=off -ctv=q4_0").find("flash attention off"), std::string::npos);
  // Another flag's value after '=' is its own: "-c=4096 q4_0" does not take q4_0 as -c's value.
  EXPECT_NE(errorOf("llama.cpp -c=4096 q4_0").find("'q4_0' is not a flag"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
