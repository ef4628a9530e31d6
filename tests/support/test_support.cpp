// SPDX-License-Identifier: GPL-3.0-or-later
#include "tests/support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace kvscope::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  for (;;) {
    fs::path p = fs::temp_directory_path() /
                 ("kvscope-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
                  "-" + std::to_string(rd() % 100000));
    std::error_code ec;
    if (fs::create_directory(p, ec)) {
      path_ = p;
      return;
    }
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

RunResult runCli(const std::string& args) {
  TempDir tmp;
  const std::string outFile = tmp.file("out"), errFile = tmp.file("err");
  const std::string cmd = std::string("'") + KVSCOPE_CLI_PATH + "' " + args + " >'" + outFile +
                          "' 2>'" + errFile + "' </dev/null";
  int raw = std::system(cmd.c_str());
  RunResult r;
  r.exitCode = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(outFile);
  r.err = slurp(errFile);
  return r;
}

namespace {
/// Whether /proc/PID/status lists `sig` among the caught signals (SigCgt, a hex mask whose bit
/// sig - 1 is set once a handler is installed).
bool catches(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    return ((mask >> (sig - 1)) & 1ULL) != 0;
  }
  return false;
}
}  // namespace

bool waitUntilCatching(pid_t pid, int sig, std::chrono::milliseconds timeout, const std::function<bool()>& ready) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  bool caught = false;
  while (std::chrono::steady_clock::now() < end) {
    siginfo_t info{};
    // Ended (or not our child): stop waiting; the caller reaps it and sees how it ended.
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0) {
      return false;
    }
    caught = caught || catches(pid, sig);
    if (caught && (!ready || ready())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

fs::path sharedDir() {
  fs::path p = KVSCOPE_SHARED_DIR;
  return fs::is_directory(p) ? p : fs::path{};
}

fs::path storiesModel() {
  fs::path dir = sharedDir();
  if (dir.empty()) return {};
  fs::path p = dir / "models" / "stories260K.bin";
  return fs::exists(p) ? p : fs::path{};
}

}  // namespace kvscope::test
