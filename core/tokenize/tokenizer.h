// SPDX-License-Identifier: GPL-3.0-or-later
// Tokenizers read from model files (docs/real-models.md, "Tokenizers"). Each file keeps its own
// engine's semantics: a GGUF vocabulary tokenizes as llama.cpp does (src/llama-vocab.cpp:
// llm_tokenizer_spm for `llama`, llm_tokenizer_bpe for `gpt2`), a tokenizer.json as Hugging Face
// `tokenizers` does. A Tokenizer is immutable once built; encode() may run on several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/status.h"

namespace kvscope {

/// What a GGUF file says about its tokenizer (the `tokenizer.ggml.*` keys), filled by the GGUF
/// reader; no file is parsed here.
struct VocabularyData {
  std::string model;                  ///< tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;                    ///< tokenizer.ggml.pre (gpt2): "default", "gpt-2", "llama-bpe", "qwen2", "smollm", …
  std::vector<std::string> tokens;    ///< tokenizer.ggml.tokens
  std::vector<float> scores;          ///< tokenizer.ggml.scores (may be empty)
  std::vector<int32_t> tokenTypes;    ///< tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte (may be empty)
  std::vector<std::string> merges;    ///< tokenizer.ggml.merges ("a b"), gpt2 only
  std::optional<int> bos, eos, unk, pad;               ///< tokenizer.ggml.bos_token_id, eos_…, unknown_…, padding_…
  std::optional<bool> addBos, addEos, addSpacePrefix;  ///< tokenizer.ggml.add_bos_token, add_eos_token, add_space_prefix (absent: llama.cpp's default)
};

/// Which file and engine semantics a Tokenizer follows.
enum class TokenizerKind {
  GgufLlama,       ///< GGUF `llama`: SentencePiece BPE with scores, as llama.cpp's llm_tokenizer_spm
  GgufGpt2,        ///< GGUF `gpt2`: byte-level BPE with merges, as llama.cpp's llm_tokenizer_bpe
  HuggingFaceBpe,  ///< tokenizer.json with a BPE model, as Hugging Face tokenizers
};

/// A tokenizer: text to token ids, token ids to readable text.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids of `text` (UTF-8; invalid UTF-8 is refused naming the byte offset). `addSpecial`
  /// adds BOS/EOS as the model says (addsBos(), addsEos()). `parseSpecial`: special (control)
  /// tokens written in the text become those tokens; otherwise they are tokenized as text.
  /// User-defined / non-special added tokens are always split out first, as both engines do.
  /// llama.cpp's llama_tokenize(add_special, parse_special) takes the same two flags; Hugging
  /// Face's tokenizer(text) is addSpecial = true, parseSpecial = true.
  [[nodiscard]] Expected<std::vector<int>> encode(std::string_view text, bool addSpecial,
                                                  bool parseSpecial = false) const {
    return encodeImpl(text, addSpecial, parseSpecial);
  }
  /// The token's text as a user reads it (what `/token_text` stores): the bytes of tokenBytes()
  /// written by displayableText(), so always valid UTF-8. "" for an id outside the vocabulary.
  [[nodiscard]] std::string tokenText(int id) const;
  /// The bytes the token stands for as the engine's detokenizer writes them: llama.cpp's
  /// token_to_piece (special tokens included, as their text) or Hugging Face's decoder applied to
  /// the token alone as if it stood inside a text. May be partial UTF-8.
  [[nodiscard]] virtual std::string tokenBytes(int id) const = 0;
  /// The token's string as the file stores it ("▁the", "Ġthe", "<0x0A>"); "" when out of range.
  [[nodiscard]] virtual std::string tokenPiece(int id) const = 0;
  /// Number of token ids (the largest id + 1).
  [[nodiscard]] virtual int vocabSize() const = 0;
  /// The beginning-of-sequence token, if the tokenizer has one.
  [[nodiscard]] virtual std::optional<int> bos() const = 0;
  /// The end-of-sequence token, if the tokenizer has one.
  [[nodiscard]] virtual std::optional<int> eos() const = 0;
  /// Whether encode(…, addSpecial = true) puts BOS first.
  [[nodiscard]] virtual bool addsBos() const = 0;
  /// Whether encode(…, addSpecial = true) puts EOS last.
  [[nodiscard]] virtual bool addsEos() const = 0;
  /// One line for `model-info`: kind, pre-tokenizer, vocabulary size, merges, BOS/EOS.
  [[nodiscard]] virtual std::string describe() const = 0;
  /// Which file and semantics this tokenizer follows.
  [[nodiscard]] virtual TokenizerKind kind() const = 0;

  /// tokenText() of each id.
  [[nodiscard]] std::vector<std::string> tokenTexts(const std::vector<int>& ids) const;

 protected:
  [[nodiscard]] virtual Expected<std::vector<int>> encodeImpl(std::string_view text, bool addSpecial,
                                                              bool parseSpecial) const = 0;
};

/// Builds the tokenizer of a GGUF file from its `tokenizer.ggml.*` keys. `origin` (the file's
/// path) starts every error message. Refuses unknown models and pre-tokenizers by name, arrays
/// of different lengths, duplicate or invalid-UTF-8 tokens, ids out of range, a gpt2 vocabulary
/// without merges and merges naming tokens not in the vocabulary.
[[nodiscard]] Expected<std::unique_ptr<Tokenizer>> tokenizerFromGguf(const VocabularyData& vocabulary,
                                                                    std::string_view origin);

/// Reads a Hugging Face tokenizer: `path` is a tokenizer.json or a folder holding one; a
/// tokenizer_config.json beside it, when present, gives add_bos_token / add_eos_token and the
/// bos/eos tokens.
[[nodiscard]] Expected<std::unique_ptr<Tokenizer>> loadTokenizerJson(const std::string& path);

/// The same from memory: `tokenizerJson` named `origin` in messages; `configJson` (a
/// tokenizer_config.json, empty = none) named `configOrigin`.
[[nodiscard]] Expected<std::unique_ptr<Tokenizer>> tokenizerFromJson(std::string_view tokenizerJson,
                                                                    std::string_view origin,
                                                                    std::string_view configJson = {},
                                                                    std::string_view configOrigin = {});

/// The token_text rule: valid UTF-8 sequences are copied, every other byte (and NUL, which HDF5
/// strings cannot hold) is written as `<0xNN>` (two upper-case hex digits).
[[nodiscard]] std::string displayableText(std::string_view bytes);

/// ok() when `text` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
/// otherwise InvalidArgument "`what`: invalid UTF-8 at byte offset N (0xNN)".
[[nodiscard]] Status checkUtf8(std::string_view text, std::string_view what);

}  // namespace kvscope
