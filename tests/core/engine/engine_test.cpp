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
  EXPECT_EQ(e, "unknown engine 'exllamav2' (known engines: llama.cpp, ik_llama.cpp, vllm, sglang, lmdeploy, transformers, trtllm)");
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

// src/llama-context.cpp (001d906a), llama_init_from_model: with flash attention not disabled a
// quantized K (V) type whose ggml_blck_size (32) does not divide n_embd_head_k (_v) is refused,
// "K cache type q8_0 with block size 32 does not divide n_embd_head_k=8" (stories260K: D = 8).
// kvscope used to emulate such a cache and report numbers. f16, bf16, f32 (block size 1) pass.
TEST(Llamacpp, QuantizedTypesNeedBlocksThatDivideTheHeadDim) {
  const KvShape d8{8, 5, 4};
  std::string e = errorOf("llama.cpp -ctk q8_0", d8);
  EXPECT_NE(e.find("\"K cache type q8_0 with block size 32 does not divide n_embd_head_k=8\""), std::string::npos) << e;
  EXPECT_NE(e.find("allowed at D = 8: f32, f16, bf16"), std::string::npos) << e;
  e = errorOf("llama.cpp -ctv q4_0", d8);
  EXPECT_NE(e.find("\"V cache type q4_0 with block size 32 does not divide n_embd_head_v=8\""), std::string::npos) << e;
  EXPECT_NE(errorOf("llama.cpp -ctk iq4_nl", {48, 4, 2}).find("n_embd_head_k=48"), std::string::npos);
  auto f = resolveEngine("llama.cpp -ctk bf16 -ctv f32", d8);
  ASSERT_TRUE(f.hasValue()) << f.status().message();
  EXPECT_EQ(f->key, "bf16");
  EXPECT_TRUE(resolveEngine("llama.cpp -ctk q8_0", {96, 4, 2}).hasValue());  // 96 = 3·32
  // The presets store what llama.cpp stores, so they refuse the same head dims.
  auto p = resolvePreset("llamacpp-q8_0", d8);
  ASSERT_FALSE(p.hasValue());
  EXPECT_NE(p.status().message().find("preset llamacpp-q8_0: -ctk q8_0 with D = 8: llama.cpp refuses it"),
            std::string::npos)
      << p.status().message();
  EXPECT_FALSE(resolvePreset("llamacpp-q4_0-norot", d8).hasValue());
}

// ggml-org/ggml d99724f2: src/ggml-cpu/ggml-cpu.c type_traits_cpu[] .vec_dot_type — Q8_0 for
// q8_0, q4_0, q5_0, iq4_nl; Q8_1 for q4_1, q5_1; F16 for f16; BF16 for bf16; F32 for f32.
// src/ggml-cpu/ops.cpp ggml_compute_forward_flash_attn_ext_f16_one_chunk converts each Q row with
// type_traits_cpu[k_vec_dot_type].from_float before kq_vec_dot; ggml_compute_forward_mul_mat does
// the same to src1 (Q) without flash attention. src/llama-graph.cpp build_attn_mha casts an f32
// K to f16 for flash attention. ggml-quants.c quantize_row_q8_1_ref computes q8_0's d and codes.
TEST(Llamacpp, WhatTheCpuAttentionRoundsQTo) {
  auto query = [](std::string_view text) {
    auto r = resolveEngine(text, kD128);
    EXPECT_TRUE(r.hasValue()) << text;
    return r.hasValue() ? r->query : std::string("error");
  };
  // At D = 128 the quantized K is rotated by H_128 (build_input_k_rot) and so is Q
  // (llm_graph_context::build_attn), before the kernel converts Q: the conversion happens in the
  // rotated basis, and the query spec carries K's rotation.
  for (const char* t : {"q8_0", "q4_0", "q5_0", "iq4_nl"}) {
    EXPECT_EQ(query("llama.cpp -ctk " + std::string(t)), "q8_0,rot=hadamard:128") << t;
    EXPECT_EQ(query("llama.cpp -fa off -ctk " + std::string(t)), "q8_0,rot=hadamard:128") << t;  // via mul_mat
  }
  EXPECT_EQ(query("LLAMA_ATTN_ROT_DISABLE=1 llama.cpp -ctk q8_0"), "q8_0");
  auto q41 = resolveEngine("llama.cpp -ctk q4_1", kD128);
  ASSERT_TRUE(q41.hasValue());
  EXPECT_EQ(q41->query, "q8_0,rot=hadamard:128");  // q8_1 has q8_0's scale and codes
  EXPECT_TRUE(hasNote(*q41, "kvscope has no q8_1"));
  EXPECT_EQ(query("llama.cpp -ctk q5_1"), "q8_0,rot=hadamard:128");
  EXPECT_EQ(query("llama.cpp"), "fp16");  // the f16 default
  EXPECT_EQ(query("llama.cpp -ctk bf16"), "bf16");
  EXPECT_EQ(query("llama.cpp -ctk f32"), "fp16");      // flash attention (auto) casts f32 K to f16
  EXPECT_EQ(query("llama.cpp -ctk f32 -fa off"), "");  // exact
  // The K type decides, not V's.
  EXPECT_EQ(query("llama.cpp -ctk f16 -ctv q8_0"), "fp16");
  std::string note;
  EXPECT_EQ(llamacppQuerySpec("q8_0", true, note), "q8_0");
  EXPECT_NE(note.find("after the rotation K gets"), std::string::npos) << note;
  // Presets and plain specs do not round Q.
  auto p = resolvePreset("llamacpp-q8_0", kD128);
  ASSERT_TRUE(p.hasValue());
  EXPECT_EQ(p->query, "");
}

// ikawrakow/ik_llama.cpp (8337e4cd): common/common.cpp parses -ctk-first/-ctk-last TYPE,N, and
// src/llama.cpp applies the last-N override after the first-N one; no rotation without -khad.
TEST(IkLlamacpp, OverridesBecomeAPlanWithoutRotation) {
  auto r = resolveEngine("ik_llama.cpp -m x.gguf -ctk q4_0 -ctk-first q8_0,2 -ctk-last q5_0,1 -ctv q8_0", kD128);
  ASSERT_TRUE(r.hasValue()) << r.status().message();
  EXPECT_EQ(r->key, "q4_0;first2:q8_0;last1:q5_0");
  EXPECT_EQ(r->value, "q8_0");
  EXPECT_TRUE(hasNote(*r, "ignored -m x.gguf"));
  EXPECT_NE(errorOf("ik_llama.cpp -ctk q4_0 -khad").find("-khad"), std::string::npos);
  EXPECT_NE(errorOf("ik_llama.cpp -ctk-first q8_0").find("TYPE,N"), std::string::npos);
  EXPECT_NE(errorOf("ik_llama.cpp -ctk q6_0").find("shares with llama.cpp"), std::string::npos);
  EXPECT_NE(errorOf("ik_llama.cpp -ctv-last q8_0,1", {8, 5, 4}).find("n_embd_head_v=8"), std::string::npos);
  EXPECT_EQ(findEngine("ik_llama"), findEngine("ik_llama.cpp"));
}

// A release named with @: the splitter keeps the name and the release apart; a release that is
// not a number is refused.
TEST(EngineSplit, ReleaseAfterTheName) {
  auto a = splitEngineString("K_SCALE_CONSTANT=300 vllm@0.18 --kv-cache-dtype fp8");
  ASSERT_TRUE(a.hasValue()) << a.status().message();
  EXPECT_EQ(a->name, "vllm");
  EXPECT_EQ(a->version, "0.18");
  EXPECT_TRUE(a->atLeast("0.18"));
  EXPECT_TRUE(a->atLeast("0.9"));
  EXPECT_FALSE(a->atLeast("0.26"));
  EXPECT_TRUE(splitEngineString("vllm --kv-cache-dtype fp8")->atLeast("99"));  // no release: the newest
  EXPECT_LT(compareReleases("0.5.14", "0.5.15"), 0);
  EXPECT_EQ(compareReleases("4.56", "4.56.0"), 0);
  EXPECT_GT(compareReleases("0.26", "0.9"), 0);
  EXPECT_FALSE(splitEngineString("vllm@").hasValue());
  EXPECT_FALSE(splitEngineString("vllm@0..1").hasValue());
  EXPECT_NE(splitEngineString("vllm@latest").status().message().find("not a release number"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
