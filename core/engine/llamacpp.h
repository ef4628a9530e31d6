// SPDX-License-Identifier: GPL-3.0-or-later
// What llama.cpp stores for a cache type (-ctk/-ctv) at a head dim: the ggml type and, since
// PR #21038 (merged 2026-04-01), a Hadamard rotation; which head dims it refuses; and what its CPU
// attention does to Q (docs/engines.md). Shared by the `llamacpp-*` presets and the `llama.cpp`
// and `ik_llama.cpp` engine rows.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include <vector>

#include "core/engine/engine.h"
#include "core/util/status.h"

namespace kvscope {

/// llama.cpp's KV cache types, in the order of common/arg.cpp's `kv_cache_types`.
extern const std::array<std::string_view, 9> kLlamacppCacheTypes;
/// The same, as a span.
std::span<const std::string_view> llamacppCacheTypes();
/// "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1".
std::string llamacppCacheTypeList();
/// True for a type in llamacppCacheTypes().
bool isLlamacppCacheType(std::string_view type);
/// ggml_is_quantized for a cache type: false for f32, f16 and bf16.
bool isLlamacppQuantized(std::string_view type);

/// One tensor's spec string as llama.cpp stores it, and why.
struct LlamacppTensor {
  std::string spec;  ///< e.g. "q4_0,rot=hadamard:128"
  std::string note;  ///< e.g. "K: q4_0 is quantized and D = 128 is a multiple of 64: …"
};
/// The rule of src/llama-kv-cache.cpp (attn_rot_k / attn_rot_v in the constructor,
/// build_input_k_rot / build_input_v_rot): a quantized type with D % 64 = 0 is rotated by
/// block-diagonal normalized Hadamard matrices, of the largest power of two dividing D for keys
/// and of 64 for values; `rotationDisabled` is LLAMA_ATTN_ROT_DISABLE. `type` must be a
/// llama.cpp cache type and headDim > 0.
LlamacppTensor llamacppTensor(std::string_view type, bool isKey, int headDim, bool rotationDisabled);

/// ggml's block size of a cache type (ggml_blck_size): 32 for the quantized types, 1 for f32, f16, bf16.
int llamacppBlockSize(std::string_view type);
/// src/llama-context.cpp, llama_init_from_model: a quantized K (V) cache type whose block size does
/// not divide the head dim is refused ("K cache type q8_0 with block size 32 does not divide
/// n_embd_head_k=8"). `who` starts the message ("llama.cpp", "preset llamacpp-q8_0"); ok for headDim 0.
Status llamacppCheckBlocks(std::string_view typeK, std::string_view typeV, int headDim, std::string_view who);
/// What ggml's CPU attention rounds Q to before the scores for a K cache type (ggml-cpu.c
/// type_traits_cpu[type].vec_dot_type, taken by ops.cpp ggml_compute_forward_flash_attn_ext_f16
/// and ggml_compute_forward_mul_mat), as a spec string ("" = exact), and why in `note`.
/// `flashAttention`: on (or auto, which the CPU backend turns on) rather than off.
std::string llamacppQuerySpec(std::string_view typeK, bool flashAttention, std::string& note);

/// The cache types a plan search chooses from (f32 left out: never smaller than f16), as llama.cpp
/// (rotation on) or ik_llama.cpp (`rotationDisabled`: ggml's blocks as they are) stores them at
/// `shape`; the quantized ones are left out when the head dim refuses them (named in `notes`).
std::vector<EngineType> llamacppPlanTypes(const KvShape& shape, bool rotationDisabled, std::vector<std::string>* notes);

}  // namespace kvscope
