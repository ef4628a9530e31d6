// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors reader and Hugging Face folders. The rules follow the safetensors library
// (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata, Metadata::validate): the
// header length is at most 100,000,000 bytes and fits in the file, the header is a UTF-8 JSON
// object starting with '{', tensors sorted by data_offsets start where the previous one ended
// (from 0), each spans product(shape) · dtype bytes, and the last ends at the end of the file.
#include "core/modelfile/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/util/utf8.h"

namespace kvscope {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeader = 100'000'000;  // safetensors' MAX_HEADER_SIZE

struct Dtype {
  const char* name;
  int bits;
};
constexpr Dtype kDtypes[] = {
    {"BOOL", 8},     {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},
    {"I16", 16},     {"U16", 16},     {"F16", 16},     {"BF16", 16},   {"I32", 32},    {"U32", 32},
    {"F32", 32},     {"I64", 64},     {"U64", 64},     {"F64", 64},    {"C64", 64},    {"F4", 4},
    {"F6_E2M3", 6},  {"F6_E3M2", 6},
};

/// The ggml type kvscope reads a dtype as; nullopt for the dtypes it does not read.
std::optional<GgmlType> readableAs(std::string_view dtype) {
  if (dtype == "F32") return GgmlType::F32;
  if (dtype == "F16") return GgmlType::F16;
  if (dtype == "BF16") return GgmlType::Bf16;
  return std::nullopt;
}

/// A small file's text (config.json, the index), through MappedFile so that a FIFO is refused.
Expected<std::string> readText(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  const auto bytes = (*file)->bytes();
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t valid = validUtf8Prefix(text);
  if (valid != text.size())
    return Status::invalidData(path + ": not valid UTF-8 (byte " + std::to_string(valid) + ")");
  return text;
}

Expected<json> parseJson(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    return Status::invalidData(origin + ": not valid JSON: " + e.what());
  }
}

std::string joinPath(const std::string& folder, const std::string& name) {
  if (folder.empty() || folder.back() == '/') return folder + name;
  return folder + "/" + name;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

int safetensorsDtypeBits(std::string_view dtype) {
  for (const Dtype& d : kDtypes)
    if (dtype == d.name) return d.bits;
  return 0;
}

// ---- SafetensorsFile -------------------------------------------------------------------------

Expected<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  return parse(std::move(*file));
}

Expected<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  auto bad = [&](const std::string& problem) { return Status::invalidData(path + ": " + problem); };
  const auto bytes = file->bytes();
  const uint64_t size = file->size();
  if (size < 8)
    return bad("not a safetensors file: " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > size - 8)
    return bad("the header length " + std::to_string(n) + " is larger than the rest of the file (" +
               std::to_string(size - 8) + " bytes): truncated, or not a safetensors file");
  if (n > kMaxHeader)
    return bad("the header length " + std::to_string(n) + " exceeds safetensors' limit of " +
               std::to_string(kMaxHeader) + " bytes");
  if (n < 2 || bytes[8] != '{') return bad("not a safetensors file: the header does not start with '{'");
  const std::string_view headerText(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n));
  if (const size_t valid = validUtf8Prefix(headerText); valid != headerText.size())
    return bad("the JSON header is not valid UTF-8 (header byte " + std::to_string(valid) + ")");
  auto header = parseJson(std::string(headerText), path + ": JSON header");
  if (!header) return header.status();
  if (!header->is_object()) return bad("the JSON header is not an object");

  std::shared_ptr<SafetensorsFile> out(new SafetensorsFile());
  out->file_ = file;
  out->dataOffset_ = 8 + n;
  const uint64_t dataSize = size - 8 - n;
  for (const auto& [name, entry] : header->items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ is not an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) return bad("__metadata__ '" + k + "' is not a string");
        out->metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string context = "tensor '" + name + "'";
    if (!entry.is_object()) return bad(context + ": not an object with dtype, shape and data_offsets");
    SafetensorsTensorInfo t;
    t.name = name;
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) return bad(context + ": no string 'dtype'");
    t.dtype = dtype->get<std::string>();
    const int bits = safetensorsDtypeBits(t.dtype);
    if (bits == 0) return bad(context + ": unknown dtype '" + t.dtype + "'");
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) return bad(context + ": no 'shape' array");
    uint64_t elements = 1;
    bool overflow = false;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return bad(context + ": shape " + shape->dump() + " holds something other than non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      t.shape.push_back(static_cast<int64_t>(v));
      if (v != 0 && elements > UINT64_MAX / v) overflow = true;
      if (!overflow) elements *= v;
    }
    if (std::find(t.shape.begin(), t.shape.end(), int64_t{0}) != t.shape.end()) elements = 0, overflow = false;
    if (overflow || elements > UINT64_MAX / static_cast<uint64_t>(bits) || elements > static_cast<uint64_t>(INT64_MAX))
      return bad(context + ": shape " + shape->dump() + " overflows 64-bit sizes");
    const uint64_t bitCount = elements * static_cast<uint64_t>(bits);
    if (bitCount % 8 != 0) return bad(context + ": shape " + shape->dump() + " of " + t.dtype + " is not whole bytes");
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      return bad(context + ": 'data_offsets' is not a pair of non-negative integers");
    t.begin = (*offsets)[0].get<uint64_t>();
    t.end = (*offsets)[1].get<uint64_t>();
    if (t.end < t.begin)
      return bad(context + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] end before they begin");
    if (t.end - t.begin != bitCount / 8)
      return bad(context + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] span " +
                 std::to_string(t.end - t.begin) + " bytes, but " + t.dtype + " " + shape->dump() + " needs " +
                 std::to_string(bitCount / 8));
    if (t.end > dataSize)
      return bad(context + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                 "] run past the data section (" + std::to_string(dataSize) + " bytes after the header): truncated?");
    t.fileOffset = out->dataOffset_ + t.begin;
    out->tensors_.push_back(std::move(t));
  }
  std::sort(out->tensors_.begin(), out->tensors_.end(), [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const SafetensorsTensorInfo& t : out->tensors_) {
    if (t.begin != expected)
      return bad("tensor '" + t.name + "': data_offsets start at " + std::to_string(t.begin) + ", expected " +
                 std::to_string(expected) + (t.begin < expected ? " (it overlaps the tensor before it)" : " (a gap before it)"));
    expected = t.end;
  }
  if (expected != dataSize)
    return bad("the tensors cover " + std::to_string(expected) + " bytes of the " + std::to_string(dataSize) +
               "-byte data section (safetensors requires them to cover it exactly)");
  for (size_t i = 0; i < out->tensors_.size(); ++i) out->index_.emplace(out->tensors_[i].name, i);
  return std::shared_ptr<const SafetensorsFile>(std::move(out));
}

const SafetensorsTensorInfo* SafetensorsFile::findTensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> SafetensorsFile::weightNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& t : tensors_) names.push_back(t.name);
  return names;
}

Expected<WeightTensor> SafetensorsFile::weight(std::string_view name) const {
  const SafetensorsTensorInfo* t = findTensor(name);
  if (t == nullptr) return Status::invalidData(path() + ": tensor '" + std::string(name) + "' is missing");
  const auto type = readableAs(t->dtype);
  if (!type)
    return Status::unsupported(path() + ": tensor '" + t->name + "' has dtype " + t->dtype +
                               "; kvscope reads F32, F16 and BF16 weights");
  WeightTensor w;
  w.name = t->name;
  w.shape = t->shape;
  w.type = *type;
  w.data = file_->bytes().data() + t->fileOffset;
  w.bytes = t->bytes();
  w.file = path();
  return w;
}

// ---- HfCheckpoint ----------------------------------------------------------------------------

HfCheckpoint::HfCheckpoint() = default;
HfCheckpoint::~HfCheckpoint() = default;

Expected<std::shared_ptr<const HfCheckpoint>> HfCheckpoint::open(const std::string& folder) {
  std::shared_ptr<HfCheckpoint> out(new HfCheckpoint());
  out->folder_ = folder;
  const std::string configPath = joinPath(folder, "config.json");
  if (!exists(configPath))
    return Status::invalidData(folder + ": no config.json (a Hugging Face model folder holds config.json and "
                                        "model.safetensors or model.safetensors.index.json)");
  auto configText = readText(configPath);
  if (!configText) return configText.status();
  auto config = parseJson(*configText, configPath);
  if (!config) return config.status();
  if (!config->is_object()) return Status::invalidData(configPath + ": not a JSON object");
  out->configText_ = std::move(*configText);
  out->config_ = std::make_unique<json>(std::move(*config));

  const std::string single = joinPath(folder, "model.safetensors");
  const std::string indexPath = joinPath(folder, "model.safetensors.index.json");
  if (exists(single)) {
    auto file = SafetensorsFile::open(single);
    if (!file) return file.status();
    out->files_.push_back(*file);
    out->names_ = (*file)->weightNames();
    for (const auto& n : out->names_) out->fileOf_.emplace(n, 0);
    return std::shared_ptr<const HfCheckpoint>(std::move(out));
  }
  if (!exists(indexPath))
    return Status::invalidData(folder + ": neither model.safetensors nor model.safetensors.index.json (kvscope reads "
                                        "safetensors weights; PyTorch .bin checkpoints are not read)");
  auto indexText = readText(indexPath);
  if (!indexText) return indexText.status();
  auto index = parseJson(*indexText, indexPath);
  if (!index) return index.status();
  auto badIndex = [&](const std::string& problem) { return Status::invalidData(indexPath + ": " + problem); };
  if (!index->is_object()) return badIndex("not a JSON object");
  const auto map = index->find("weight_map");
  if (map == index->end() || !map->is_object()) return badIndex("no 'weight_map' object");
  std::map<std::string, size_t> shardIndex;  // shard file name → index into files_, in name order
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string()) return badIndex("weight_map entry '" + name + "' is not a file name");
    const std::string file = shard.get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      return badIndex("weight_map entry '" + name + "' names '" + file +
                      "'; shards must be plain file names in the model folder");
    shardIndex.emplace(file, 0);
    entries.emplace_back(name, file);
  }
  if (entries.empty()) return badIndex("the weight_map is empty");
  for (auto& [file, i] : shardIndex) {
    auto shard = SafetensorsFile::open(joinPath(folder, file));
    if (!shard) return shard.status();
    i = out->files_.size();
    out->files_.push_back(*shard);
  }
  // nlohmann's objects keep their keys sorted: the names come sorted.
  for (const auto& [name, file] : entries) {
    const size_t i = shardIndex[file];
    if (!out->files_[i]->hasWeight(name))
      return badIndex("weight_map puts tensor '" + name + "' in " + file + ", which does not hold it");
    out->names_.push_back(name);
    out->fileOf_.emplace(name, i);
  }
  return std::shared_ptr<const HfCheckpoint>(std::move(out));
}

bool HfCheckpoint::hasWeight(std::string_view name) const { return fileOf_.count(std::string(name)) != 0; }

Expected<WeightTensor> HfCheckpoint::weight(std::string_view name) const {
  auto it = fileOf_.find(std::string(name));
  if (it == fileOf_.end()) return Status::invalidData(folder_ + ": tensor '" + std::string(name) + "' is missing");
  return files_[it->second]->weight(name);
}

}  // namespace kvscope
