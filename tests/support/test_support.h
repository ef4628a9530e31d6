// SPDX-License-Identifier: GPL-3.0-or-later
// Helpers shared by the test executables: temporary folders, running the CLI, ../shared paths.
#pragma once

#include <filesystem>
#include <string>

namespace kvscope::test {

/// A fresh folder under the system temp dir, removed (with its content) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Result of running a command.
struct RunResult {
  int exitCode = -1;
  std::string out;  ///< standard output
  std::string err;  ///< standard error
};

/// Runs kvscope-cli with `args` (a shell-quoted argument string) and captures its output.
RunResult runCli(const std::string& args);

/// ../shared as seen from the source tree, or empty when it does not exist.
std::filesystem::path sharedDir();
/// ../shared/models/stories260K.bin, or empty when absent.
std::filesystem::path storiesModel();

}  // namespace kvscope::test
