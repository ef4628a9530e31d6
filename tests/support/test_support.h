// SPDX-License-Identifier: GPL-3.0-or-later
// Helpers shared by the test executables: temporary folders, running the CLI, ../shared paths.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
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

/// Waits until process `pid` has a handler installed for signal `sig` (Linux: the SigCgt mask
/// of /proc/PID/status) and then until `ready` holds, polling every few milliseconds. False when
/// `timeout` passes first or the process is gone. Tests that signal a child use it instead of a
/// fixed sleep: on a loaded machine a child can still be loading its libraries after a second.
bool waitUntilCatching(pid_t pid, int sig, std::chrono::milliseconds timeout,
                       const std::function<bool()>& ready = {});

/// ../shared as seen from the source tree, or empty when it does not exist.
std::filesystem::path sharedDir();
/// ../shared/models/stories260K.bin, or empty when absent.
std::filesystem::path storiesModel();

}  // namespace kvscope::test
