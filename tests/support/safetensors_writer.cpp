// SPDX-License-Identifier: GPL-3.0-or-later
#include "tests/support/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/util/small_float.h"

namespace kvscope::test {
namespace {

bool writeFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  return static_cast<bool>(out);
}

}  // namespace

std::vector<uint8_t> encodeSafetensors(const std::string& dtype, std::span<const float> values) {
  std::vector<uint8_t> out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
  } else if (dtype == "F16" || dtype == "BF16") {
    out.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = dtype == "F16" ? fp::fp16Bits(values[i]) : fp::bf16Bits(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    throw std::invalid_argument("no encoder for safetensors dtype " + dtype);
  }
  return out;
}

void SafetensorsWriter::addTensor(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype,
                                  std::span<const float> values) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("tensor '" + name + "': " + std::to_string(values.size()) + " values for " +
                                std::to_string(n) + " elements");
  addTensorBytes(name, shape, dtype, encodeSafetensors(dtype, values));
}

void SafetensorsWriter::addTensorBytes(const std::string& name, const std::vector<int64_t>& shape,
                                       const std::string& dtype, std::vector<uint8_t> bytes) {
  tensors_.push_back({name, shape, dtype, std::move(bytes)});
}

std::string SafetensorsWriter::headerJson() const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return h.dump();
}

std::vector<uint8_t> SafetensorsWriter::bytes() const {
  std::string header = headerJson();
  header.resize((header.size() + 7) / 8 * 8, ' ');
  size_t total = 8 + header.size();
  for (const Tensor& t : tensors_) total += t.bytes.size();
  std::vector<uint8_t> out(total);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  size_t at = 8 + header.size();
  for (const Tensor& t : tensors_) {
    if (!t.bytes.empty()) std::memcpy(out.data() + at, t.bytes.data(), t.bytes.size());
    at += t.bytes.size();
  }
  return out;
}

bool SafetensorsWriter::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  return writeFile(path, b.data(), b.size());
}

std::vector<std::string> SafetensorsWriter::names() const {
  std::vector<std::string> n;
  for (const Tensor& t : tensors_) n.push_back(t.name);
  return n;
}

bool HfFolderWriter::write(const std::string& folder, int shards) const {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (!writeFile(folder + "/config.json", config_.data(), config_.size())) return false;
  if (shards <= 1) return all_.write(folder + "/model.safetensors");
  std::vector<SafetensorsWriter> parts(static_cast<size_t>(shards));
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < all_.tensors_.size(); ++i) {
    const auto& t = all_.tensors_[i];
    const size_t s = i % parts.size();
    parts[s].tensors_.push_back(t);
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05d.safetensors", s + 1, shards);
    map[t.name] = name;
    total += t.bytes.size();
  }
  for (size_t s = 0; s < parts.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05d.safetensors", s + 1, shards);
    if (!parts[s].write(folder + "/" + name)) return false;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  const std::string text = index.dump(2);
  return writeFile(folder + "/model.safetensors.index.json", text.data(), text.size());
}

}  // namespace kvscope::test
