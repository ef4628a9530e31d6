// SPDX-License-Identifier: GPL-3.0-or-later
#include "tests/support/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

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
