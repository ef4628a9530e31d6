// SPDX-License-Identifier: GPL-3.0-or-later
// Every hostile dump of the generated corpus gets a clear error (or, for the controls, a clean
// read) from the Dump API: no crash, no exception, no unbounded allocation, no HDF5-DIAG.
#include <gtest/gtest.h>

#include <cctype>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>

#include "core/io/dump.h"
#include "tests/core/reliability/hostile_corpus.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {
namespace fs = std::filesystem;
using test::hostile::Case;
using test::hostile::Expect;

/// Redirects standard error (fd 2) into a file for the lifetime of the object.
class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    std::FILE* f = std::fopen(path_.c_str(), "w");
    ::dup2(::fileno(f), 2);
    std::fclose(f);
  }
  ~StderrCapture() { restore(); }
  std::string finish() {
    restore();
    return test::hostile::slurpBytes(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

/// What happened when a case was opened and every tensor of every layer was read.
struct Outcome {
  bool opened = false;
  Status error;                      ///< first failure (open or read); ok when none
  std::vector<std::string> warnings;
  int64_t nonFinite = 0;             ///< NaN + Inf over all tensors read
  std::string exception;             ///< set when anything threw (always a defect)
};

Outcome openAndReadAll(const Case& c, const OpenOptions& base = {}) {
  Outcome out;
  try {
    OpenOptions options = base;
    if (!c.mapping.empty()) {
      auto mapping = loadMapping(c.mapping);
      if (!mapping) {
        out.error = mapping.status();
        return out;
      }
      options.mapping = *mapping;
    }
    auto dump = Dump::open(c.file, options);
    if (!dump) {
      out.error = dump.status();
      return out;
    }
    out.opened = true;
    const DumpInfo& info = (*dump)->info();
    out.warnings = info.warnings;
    std::vector<TensorKind> kinds = {TensorKind::Key, TensorKind::Value};
    if (info.hasQuery) kinds.push_back(TensorKind::Query);
    if (info.hasKeyPreRope) kinds.push_back(TensorKind::KeyPreRope);
    for (int seq : {0, info.sequences - 1}) {
      for (int l = 0; l < info.layers; ++l) {
        for (TensorKind kind : kinds) {
          auto t = (*dump)->read(l, kind, seq);
          if (!t) {
            if (out.error.isOk()) out.error = t.status();
            continue;
          }
          const bool isQuery = kind == TensorKind::Query;
          EXPECT_EQ(t->heads, isQuery ? info.heads : info.kvHeads) << c.name;
          EXPECT_EQ(t->tokens, isQuery ? info.queries : info.tokens) << c.name;
          EXPECT_EQ(t->dim, info.headDim) << c.name;
          EXPECT_EQ(t->data.size(), static_cast<size_t>(t->heads * t->tokens * t->dim)) << c.name;
          NonFiniteReport r = scanNonFinite(*t);
          out.nonFinite += r.nanCount + r.infCount;
        }
      }
    }
  } catch (const std::bad_alloc&) {
    out.exception = "std::bad_alloc (an allocation was not bounded)";
  } catch (const std::exception& e) {
    out.exception = e.what();
  }
  return out;
}

void checkMessage(const Case& c, const std::string& message) {
  EXPECT_FALSE(message.empty()) << c.name << ": empty error message";
  // A mapping's problem names the mapping file, a dump's problem the dump.
  const std::string dumpName = fs::path(c.file).filename().string();
  const std::string mappingName = c.mapping.empty() ? dumpName : fs::path(c.mapping).filename().string();
  EXPECT_TRUE(message.find(dumpName) != std::string::npos || message.find(mappingName) != std::string::npos)
      << c.name << ": message names neither the file nor the mapping: " << message;
  for (const auto& m : c.mention)
    EXPECT_TRUE(test::hostile::mentions(message, m))
        << c.name << ": message does not mention '" << m << "': " << message;
}

void checkOutcome(const Case& c, const Outcome& o) {
  EXPECT_TRUE(o.exception.empty()) << c.name << ": threw " << o.exception;
  if (!o.error.isOk()) {
    EXPECT_NE(o.error.code(), StatusCode::Internal) << c.name << ": " << o.error.message();
    checkMessage(c, o.error.message());
  }
  switch (c.expect) {
    case Expect::Valid:
      EXPECT_TRUE(o.error.isOk()) << c.name << ": " << o.error.message();
      EXPECT_EQ(o.nonFinite, 0) << c.name;
      break;
    case Expect::Reject:
      EXPECT_FALSE(o.error.isOk()) << c.name << ": was accepted";
      break;
    case Expect::RejectOrWarn: {
      std::string all;
      for (const auto& w : o.warnings) all += w + "\n";
      if (o.error.isOk()) {
        EXPECT_FALSE(o.warnings.empty()) << c.name << ": accepted without a warning";
        for (const auto& m : c.mention)
          EXPECT_TRUE(test::hostile::mentions(all, m)) << c.name << ": warnings: " << all;
      }
      break;
    }
    case Expect::NonFinite:
      EXPECT_TRUE(o.error.isOk()) << c.name << ": " << o.error.message();
      EXPECT_GT(o.nonFinite, 0) << c.name;
      break;
    case Expect::NoCrash:
      break;
  }
}

TEST(HostileDumps, EveryCaseFailsCleanlyOrReadsAsExpected) {
  test::TempDir dir;
  const std::vector<Case> cases = test::hostile::buildCorpus(dir.path().string());
  ASSERT_GT(cases.size(), 50u);
  // scripts/fuzz-seeds.sh collects the corpus as seeds for the dump fuzzer.
  if (const char* seedDir = std::getenv("KVSCOPE_RELIABILITY_CORPUS_OUT")) {
    for (const Case& c : cases)
      if (c.mapping.empty())
        fs::copy_file(c.file, fs::path(seedDir) / (c.name + ".h5"), fs::copy_options::overwrite_existing);
  }
  std::map<std::string, int> tally;
  StderrCapture capture(dir.file("stderr.txt"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Outcome o = openAndReadAll(c);
    checkOutcome(c, o);
    if (std::getenv("KVSCOPE_RELIABILITY_VERBOSE") != nullptr)
      std::printf("[ case     ] %s: %s\n", c.name.c_str(),
                  o.error.isOk() ? (o.warnings.empty() ? "read" : ("warning: " + o.warnings.front()).c_str())
                                 : o.error.message().c_str());
    ++tally[o.exception.empty() ? (o.error.isOk() ? "read" : "refused") : "threw"];
  }
  const std::string err = capture.finish();
  EXPECT_EQ(err.find("HDF5-DIAG"), std::string::npos) << "HDF5 printed its error stack:\n" << err;
  std::printf("[ corpus   ] %zu hostile inputs:", cases.size());
  for (const auto& [k, v] : tally) std::printf(" %s=%d", k.c_str(), v);
  std::printf("\n");
}

// The same corpus through the crash-isolated reader (core/io/isolated_reader.h): the reader
// changes where the file is parsed, not the verdict or its message.
/// A message with the figure of "N GiB of memory available" replaced by "…".
std::string withoutAvailableMemory(std::string m) {
  const std::string tail = " GiB of memory available";
  const size_t at = m.find(tail);
  if (at == std::string::npos) return m;
  size_t start = at;
  while (start > 0 && (std::isdigit(static_cast<unsigned char>(m[start - 1])) || m[start - 1] == '.')) --start;
  return m.replace(start, at - start, "…");
}

TEST(HostileDumps, EveryCaseFailsCleanlyThroughTheIsolatedReaderWithTheInProcessMessage) {
  test::TempDir dir;
  const std::vector<Case> cases = test::hostile::buildCorpus(dir.path().string());
  ASSERT_GT(cases.size(), 50u);
  OpenOptions isolated;
  isolated.isolation.executable = KVSCOPE_CLI_PATH;
  StderrCapture capture(dir.file("stderr.txt"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Outcome remote = openAndReadAll(c, isolated);
    checkOutcome(c, remote);
    // The private filter is registered in this process only; the reader lacks it.
    if (c.name == "filter_reader_cannot_decode") continue;
    const Outcome local = openAndReadAll(c);
    EXPECT_EQ(local.error.code(), remote.error.code()) << c.name;
    // The memory available ("22.0 GiB of memory available") moves between the two opens on a
    // busy machine: compared without it.
    EXPECT_EQ(withoutAvailableMemory(local.error.message()), withoutAvailableMemory(remote.error.message()))
        << c.name;
    EXPECT_EQ(local.warnings, remote.warnings) << c.name;
    EXPECT_EQ(local.nonFinite, remote.nonFinite) << c.name;
  }
  const std::string err = capture.finish();
  EXPECT_EQ(err.find("HDF5-DIAG"), std::string::npos) << "HDF5 printed its error stack:\n" << err;
}

TEST(HostileDumps, ExternalObjectsOpenWhenTheCallerAllowsThem) {
  // The refusal is a policy, not a reader limitation: with the option set, the same files read.
  test::TempDir dir;
  const std::vector<Case> cases = test::hostile::buildCorpus(dir.path().string());
  int checked = 0;
  for (const Case& c : cases) {
    if (c.name != "external_link_layer" && c.name != "external_raw_storage" &&
        c.name != "virtual_dataset_key")
      continue;
    SCOPED_TRACE(c.name);
    OpenOptions options;
    options.allowExternalStorage = true;
    auto dump = Dump::open(c.file, options);
    ASSERT_TRUE(dump.hasValue()) << dump.status().message();
    for (int l = 0; l < (*dump)->info().layers; ++l) {
      auto k = (*dump)->read(l, TensorKind::Key);
      auto v = (*dump)->read(l, TensorKind::Value);
      EXPECT_TRUE(k.hasValue()) << k.status().message();
      EXPECT_TRUE(v.hasValue()) << v.status().message();
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(HostileDumps, NonFiniteScanCountsAndLocatesTheFirstValue) {
  // key_has_nan puts NaN at layer 1, head 1, tokens 3 (channel 2) and 5 (channel 0).
  test::TempDir dir;
  const std::vector<Case> cases = test::hostile::buildCorpus(dir.path().string());
  auto it = std::find_if(cases.begin(), cases.end(), [](const Case& c) { return c.name == "key_has_nan"; });
  ASSERT_NE(it, cases.end());
  auto dump = Dump::open(it->file);
  ASSERT_TRUE(dump.hasValue()) << dump.status().message();
  auto key = (*dump)->read(1, TensorKind::Key);
  ASSERT_TRUE(key.hasValue()) << key.status().message();
  NonFiniteReport r = scanNonFinite(*key);
  EXPECT_EQ(r.nanCount, 2);
  EXPECT_EQ(r.infCount, 0);
  EXPECT_EQ(r.firstHead, 1);
  EXPECT_EQ(r.firstToken, 3);
  EXPECT_EQ(r.firstChannel, 2);
}

}  // namespace
}  // namespace kvscope
