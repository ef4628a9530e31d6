// SPDX-License-Identifier: GPL-3.0-or-later
// What llama.cpp stores for a cache type (-ctk/-ctv) at a head dim: the ggml type and, since
// PR #21038 (merged 2026-04-01), a Hadamard rotation (docs/engines.md). Shared by the
// `llamacpp-*` presets and the `llama.cpp` engine string.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kvscope {

/// llama.cpp's KV cache types, in the order of common/arg.cpp's `kv_cache_types`.
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

}  // namespace kvscope
