// SPDX-License-Identifier: GPL-3.0-or-later
// Issue 33 ("Hostile inputs"): the CLI failures a run of about 4,700 command × input cases found,
// one regression test each. Every test names the failure it guards; core-level halves live in
// tests/core/{util,io,quant,engine,model} and tests/ui (the headless GUI).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/core/reliability/hostile_corpus.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace kvscope {
namespace {
namespace fs = std::filesystem;
using test::RunResult;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Runs kvscope-cli after `prefix` shell commands (limits) in the same /bin/sh, stdin /dev/null.
RunResult runWith(const std::string& prefix, const std::string& args) {
  test::TempDir tmp;
  const std::string out = tmp.file("out"), err = tmp.file("err");
  const std::string cmd = prefix + " exec " + quote(KVSCOPE_CLI_PATH) + " " + args + " >" + quote(out) + " 2>" +
                          quote(err) + " </dev/null";
  const int raw = std::system(cmd.c_str());
  RunResult r;
  r.exitCode = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = test::hostile::slurpBytes(out);
  r.err = test::hostile::slurpBytes(err);
  return r;
}

RunResult run(const std::string& args) { return runWith("", args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Exit 2, one "kvscope-cli: " line that contains every part, none of a library's internals.
void expectRefused(const RunResult& r, const std::vector<std::string>& parts, const std::string& what) {
  EXPECT_EQ(r.exitCode, 2) << what << "\n" << r.err << r.out;
  EXPECT_EQ(r.err.rfind("kvscope-cli: ", 0), 0u) << what << ": " << r.err;
  for (const std::string& p : parts) EXPECT_TRUE(has(r.err, p)) << what << ": no '" << p << "' in: " << r.err;
  for (const char* internal : {"json.exception", "terminate called", "internal error", "HDF5-DIAG"})
    EXPECT_FALSE(has(r.err, internal)) << what << ": " << r.err;
}

std::vector<std::string> listDir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// A small canonical dump with queries: 2 layers, 2 kv heads, 8 tokens, D = 8.
std::string smallDump(const test::TempDir& dir, const std::string& name = "small.h5") {
  const std::string path = dir.file(name);
  EXPECT_TRUE(test::hostile::writeDump(path, {}));
  return path;
}

/// Starts kvscope-cli with `args` (stdout and stderr to files), without a shell.
pid_t spawnCli(std::vector<std::string> args, const std::string& outPath, const std::string& errPath) {
  args.insert(args.begin(), KVSCOPE_CLI_PATH);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawn(&pid, KVSCOPE_CLI_PATH, &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

/// Waits up to `limit` for `pid`; kills it (and returns -1) when it is still there.
int waitOrKill(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// --- Hangs: non-regular files -----------------------------------------------------------------

// `info small.h5 --mapping fifo` blocked forever in open(), and `timeout 10` could not end it.
// Every path kvscope reads goes through core/util/input_file.h: refused at once, named.
TEST(CliHostileInputs, AFifoOrADeviceGivenAsAnInputIsRefusedAtOnce) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A dump whose model_path attribute names the FIFO.
  const std::string modelDump = dir.file("recorded.h5");
  ASSERT_TRUE(test::hostile::writeDump(modelDump, {}, {}, [&](hid_t file) {
    test::hostile::attrString(file, "model_path", fifo);
  }));
  struct Case {
    std::string args, named;
  };
  const std::vector<Case> cases = {
      {"info " + quote(dump) + " --mapping " + quote(fifo), fifo + ": is a named pipe (FIFO)"},
      {"info " + quote(fifo), fifo + ": is a named pipe (FIFO)"},
      {"eval " + quote(fifo) + " --key int4 --value int4", fifo + ": is a named pipe (FIFO)"},
      {"info /dev/zero", "/dev/zero: is a character device"},
      {"info " + quote(dump) + " --mapping /proc/self/status", "/proc/self/status: is a file of /proc or /sys"},
      {"search " + quote(dump) + " --key-budget kl_mean=1e-3 --candidates " + quote(fifo),
       fifo + ": is a named pipe (FIFO)"},
      // A dump's model_path (or --model) for search --plan --e2e.
      {"search " + quote(modelDump) + " --key-budget kl_mean=1 --plan --e2e", fifo + ": is a named pipe (FIFO)"},
  };
  for (const Case& c : cases) {
    // A regression blocks; the test then fails after 60 s instead of hanging the suite.
    const std::string out = dir.file("o"), err = dir.file("e");
    std::vector<std::string> args;
    // Split on spaces outside quotes: the paths here have none.
    std::string word;
    for (char ch : c.args) {
      if (ch == ' ') {
        if (!word.empty()) args.push_back(word);
        word.clear();
      } else if (ch != '\'') {
        word += ch;
      }
    }
    if (!word.empty()) args.push_back(word);
    const pid_t pid = spawnCli(args, out, err);
    ASSERT_GT(pid, 0);
    const int code = waitOrKill(pid, std::chrono::seconds(60));
    const RunResult r{code, test::hostile::slurpBytes(out), test::hostile::slurpBytes(err)};
    ASSERT_NE(code, -1) << c.args << ": still running after 60 s";
    expectRefused(r, {c.named, "kvscope reads regular files only"}, c.args);
  }
}

// SIGTERM must end a process blocked in a system call. Writing a report into a FIFO nobody
// reads blocks in open() for as long as it takes; the first signal asks the work to stop, and
// the process ends (by the signal) once it has not stopped by itself within the grace period.
TEST(CliHostileInputs, SigtermEndsAProcessBlockedInASystemCall) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string fifo = dir.file("report-pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string out = dir.file("out"), err = dir.file("err");
  const pid_t pid = spawnCli({"eval", dump, "--key", "int4", "--value", "int4", "--json", fifo}, out, err);
  ASSERT_GT(pid, 0);
  // Let it start (its handler installed: a loaded machine can take more than a second to get
  // there), then reach the open of the FIFO (it is blocked there for good).
  ASSERT_TRUE(test::waitUntilCatching(pid, SIGTERM, std::chrono::seconds(60))) << "eval never got going";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "eval ended without a reader on its FIFO";
  ::kill(pid, SIGTERM);
  // Generous: the grace period is 5 s (app/cli/main.cpp, kStopGraceMs).
  const int code = waitOrKill(pid, std::chrono::seconds(60));
  ASSERT_NE(code, -1) << "still running 60 s after SIGTERM";
  EXPECT_EQ(code, 128 + SIGTERM) << test::hostile::slurpBytes(err);
  EXPECT_TRUE(has(test::hostile::slurpBytes(err), "did not stop by itself")) << test::hostile::slurpBytes(err);
  EXPECT_EQ(listDir(dir.path()), (std::vector<std::string>{"err", "out", "report-pipe", "small.h5"}));
}

// record fifo / e2e fifo … blocked in the model loader's open(). Model::load opens every model
// file through MappedFile, which refuses non-regular files through core/util/input_file.h.
TEST(CliHostileInputs, AFifoGivenAsTheModelIsRefusedAtOnce) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string fifo = dir.file("model-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"record", fifo, "--out", dir.file("r.h5")},
        std::vector<std::string>{"e2e", fifo, dump, "--key", "q8_0", "--value", "q8_0"}}) {
    const std::string out = dir.file("o"), err = dir.file("e");
    const pid_t pid = spawnCli(args, out, err);
    ASSERT_GT(pid, 0);
    const int code = waitOrKill(pid, std::chrono::seconds(60));
    ASSERT_NE(code, -1) << args[0] << ": still running after 60 s";
    expectRefused({code, "", test::hostile::slurpBytes(err)}, {fifo, "named pipe"}, args[0]);
  }
}

// --- Long work ------------------------------------------------------------------------------------

/// Runs kvscope-cli with standard error on a pseudo-terminal (where progress is shown) and
/// returns what it wrote there, with the exit status.
RunResult runOnATerminal(std::vector<std::string> args) {
  RunResult r;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return r;
  const std::string slave = ::ptsname(master);
  args.insert(args.begin(), KVSCOPE_CLI_PATH);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, slave.c_str(), O_RDWR | O_NOCTTY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, KVSCOPE_CLI_PATH, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return r;
  r.exitCode = waitOrKill(pid, std::chrono::seconds(120));
  char buf[4096];
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<size_t>(n));
  ::close(master);
  return r;
}

// `info DUMP --scan` on 20,000 layers and `synth --layers 100000` worked for minutes without a
// word: both show progress on a terminal (docs/reliability.md, "Long work", states their cost).
TEST(CliHostileInputs, LongWorkShowsProgressOnATerminal) {
  test::TempDir dir;
  const std::string dump = dir.file("layers.h5");
  const RunResult synth = runOnATerminal({"synth", dump, "--layers", "40", "--kv-heads", "1", "--heads", "1",
                                          "--tokens", "8", "--queries", "0", "--head-dim", "8"});
  ASSERT_EQ(synth.exitCode, 0) << synth.err;
  EXPECT_TRUE(has(synth.err, "synth " + dump + ": ")) << synth.err;
  EXPECT_TRUE(has(synth.err, "%")) << synth.err;
  const RunResult scan = runOnATerminal({"info", "--scan", dump});
  ASSERT_EQ(scan.exitCode, 0) << scan.err;
  EXPECT_TRUE(has(scan.err, "info --scan " + dump + ": ")) << scan.err;
  EXPECT_TRUE(has(scan.err, "layer ")) << scan.err;
  // Not on a file: the logs of scripts stay clean.
  const RunResult quiet = run("info --scan " + quote(dump));
  EXPECT_EQ(quiet.exitCode, 0);
  EXPECT_EQ(quiet.err, "");
}

// --- Layer lists, row lists ---------------------------------------------------------------------

// `--layers 0,0,0,…` ran the work once per repetition; '' was taken for "all".
TEST(CliHostileInputs, LayerListsAreSetsAndAnEmptyListIsRefused) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  std::string repeated = "0";
  for (int i = 0; i < 300; ++i) repeated += ",0-1,1,0";
  const std::string report = dir.file("r.json");
  const RunResult r = run("eval " + quote(dump) + " --key int4 --value int4 --layers " + repeated + " --json " +
                          quote(report));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto json = nlohmann::json::parse(test::hostile::slurpBytes(report));
  ASSERT_EQ(json["layers"].size(), 2u) << "each layer once, in order";
  EXPECT_EQ(json["layers"][0]["layer"], 0);
  EXPECT_EQ(json["layers"][1]["layer"], 1);
  for (const char* bad : {"''", "','", "'0,'", "' '", "0--1", "-1"}) {
    expectRefused(run("eval " + quote(dump) + " --key int4 --value int4 --layers " + bad), {"--layers"}, bad);
  }
}

// `bench --only ''` and `--only ,` ran the whole large bench.
TEST(CliHostileInputs, BenchRefusesAnEmptyGroupListBeforeAnyWork) {
  for (const char* only : {"''", "','", "'quantize,'"}) {
    const RunResult r = run(std::string("bench --quick --only ") + only);
    expectRefused(r, {"--only"}, only);
    EXPECT_FALSE(has(r.err, "bench: ")) << "work started: " << r.err;
  }
}

// --- Outputs ------------------------------------------------------------------------------------

// `bench --quick --only quantize --json /nonexistent/x.json` did all the work and only then said
// the folder does not exist. Every writing command now checks its outputs before anything else;
// the input named here does not exist either, so a message about the output proves the order.
TEST(CliHostileInputs, AnOutputThatCannotBeWrittenIsRefusedBeforeTheWork) {
  test::TempDir dir;
  const std::string missing = quote(dir.file("missing.h5"));
  const std::string bad = quote(dir.file("no/such/folder/x.json"));
  const std::vector<std::string> commands = {
      "bench --quick --only quantize --json " + bad,
      "eval " + missing + " --key int4 --value int4 --json " + bad,
      "eval " + missing + " --key int4 --value int4 --csv " + bad,
      "outliers " + missing + " --json " + bad,
      "search " + missing + " --key-budget kl_mean=1e-3 --json " + bad,
      "sensitivity " + missing + " --json " + bad,
      "sensitivity " + missing + " --csv " + bad,
      "diagnose " + missing + " --json " + bad,
      "capacity --layers 2 --kv-heads 2 --head-dim 8 --key int4 --value int4 --json " + bad,
      "e2e " + missing + " " + missing + " --key q8_0 --value q8_0 --json " + bad,
      "record " + missing + " --out " + bad,
      "read " + missing + " --layer 0 --out " + bad,
      "synth " + bad,
  };
  for (const std::string& c : commands) {
    const RunResult r = run(c);
    expectRefused(r, {"no/such/folder", "does not exist"}, c);
    EXPECT_FALSE(has(r.err, "bench: ")) << c << ": work started: " << r.err;
  }
  // An empty name and a folder are refused the same way.
  const std::string dump = smallDump(dir);
  expectRefused(run("eval " + quote(dump) + " --key int4 --value int4 --json ''"), {"--json ''", "empty file name"},
                "--json ''");
  expectRefused(run("outliers " + quote(dump) + " --json " + quote(dir.path().string())), {"is a folder"}, "folder");
}

// `record M --out M` and `eval D --json D` destroyed their input with exit 0. The same file is
// recognised by device and inode, so a second name (a hard link) is refused as well.
TEST(CliHostileInputs, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string link = dir.file("same-file.h5");
  ASSERT_EQ(::link(dump.c_str(), link.c_str()), 0);
  const std::string before = test::hostile::slurpBytes(dump);
  const std::string mapping = dir.file("map.json");
  std::ofstream(mapping) << R"({"key": {"path": "/layers/{layer}/key", "axes": "head,token,dim"},
                               "value": {"path": "/layers/{layer}/value", "axes": "head,token,dim"}})";
  const std::string mappingBefore = test::hostile::slurpBytes(mapping);
  for (const std::string& c :
       {"eval " + quote(dump) + " --key int4 --value int4 --json " + quote(dump),
        "eval " + quote(dump) + " --key int4 --value int4 --csv " + quote(link),
        "outliers " + quote(dump) + " --json " + quote(link),
        "read " + quote(dump) + " --layer 0 --out " + quote(dump),
        "eval " + quote(dump) + " --mapping " + quote(mapping) + " --key int4 --value int4 --json " + quote(mapping),
        "record " + quote(dump) + " --out " + quote(dump)}) {
    expectRefused(run(c), {"is the same file as the input", "choose another file"}, c);
  }
  EXPECT_EQ(test::hostile::slurpBytes(dump), before);
  EXPECT_EQ(test::hostile::slurpBytes(mapping), mappingBefore);
}

// `info`, `presets` and `capacity` exited 0 when standard output was /dev/full.
TEST(CliHostileInputs, AFailedWriteToStandardOutputIsAFailure) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  for (const std::string& c : std::vector<std::string>{"info " + quote(dump), "presets", "presets --json",
                                                       "capacity --layers 32 --kv-heads 8 --head-dim 128 --key q4_0 "
                                                       "--value q4_0"}) {
    const std::string cmd = quote(KVSCOPE_CLI_PATH) + " " + c + " >/dev/full 2>" + quote(dir.file("err"));
    const int raw = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << c;
    EXPECT_EQ(WEXITSTATUS(raw), 2) << c;
    const std::string err = test::hostile::slurpBytes(dir.file("err"));
    EXPECT_TRUE(has(err, "standard output: cannot write: No space left on device")) << c << ": " << err;
  }
}

// --- Values that must be refused ----------------------------------------------------------------

TEST(CliHostileInputs, OutOfRangeNumbersAreRefusedNamingTheFlagAndTheRange) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string out = quote(dir.file("s.h5"));
  struct Case {
    std::string args, flag, allowed;
  };
  const std::vector<Case> cases = {
      {"synth " + out + " --rope-theta inf", "--rope-theta", "a finite number > 0"},
      {"synth " + out + " --rope-theta nan", "--rope-theta", "a finite number > 0"},
      {"synth " + out + " --rope-theta -5", "--rope-theta", "a finite number > 0"},
      {"synth " + out + " --seed 18446744073709551616", "--seed", "a whole number from 0 to 18446744073709551615"},
      {"synth " + out + " --seed -1", "--seed", "a whole number from 0 to 18446744073709551615"},
      {"capacity --layers 2 --kv-heads 2 --head-dim 8 --key int4 --value int4 --context -1", "--context",
       "a whole number from 1 to"},
      {"capacity --layers 2 --kv-heads 2 --head-dim 8 --key int4 --value int4 --context 0", "--context",
       "a whole number from 1 to"},
      {"capacity --layers 2 --kv-heads 2 --head-dim 8 --key int4 --value int4 --batch 0", "--batch",
       "a whole number from 1 to"},
      {"record " + quote(dump) + " --out " + out + " --temperature inf", "--temperature", "a finite number ≥ 0"},
      {"record " + quote(dump) + " --out " + out + " --temperature -0.5", "--temperature", "a finite number ≥ 0"},
      {"outliers " + quote(dump) + " --threshold inf", "--threshold", "a finite number > 0"},
      {"outliers " + quote(dump) + " --top-tokens -1", "--top-tokens", "a whole number from 0 to"},
      {"sensitivity " + quote(dump) + " --candidates 'int4;;int8'", "--candidates", "an empty candidate"},
      {"eval " + quote(dump) + " --key fp8_e4m3,div=1e308 --value int4", "div=1e308", "is larger than 1e30"},
  };
  for (const Case& c : cases) expectRefused(run(c.args), {c.flag, c.allowed}, c.args);
  EXPECT_FALSE(fs::exists(dir.file("s.h5")));
}

// A version of 2^63 − 1 was printed as a negative number.
TEST(CliHostileInputs, AHugeKvdumpVersionIsPrintedAsStored) {
  test::TempDir dir;
  const std::string dump = dir.file("v.h5");
  ASSERT_TRUE(test::hostile::writeDump(dump, {}, {}, [](hid_t file) {
    test::hostile::replaceAttr(file, "kvdump_version");
    test::hostile::attrInt(file, "kvdump_version", 9223372036854775807LL);
  }));
  expectRefused(run("info " + quote(dump)), {"version 9223372036854775807 is not supported"}, "info");
}

// --- Token text, messages -----------------------------------------------------------------------

// `outliers DUMP --spec int4 --json out.json` on a dump whose /token_text holds 0xFF bytes ended
// in "internal error: [json.exception.type_error.316] invalid UTF-8 byte", exit 1.
TEST(CliHostileInputs, InvalidUtf8TokenTextIsReplacedInJsonNotFatal) {
  test::TempDir dir;
  const std::string dump = dir.file("text.h5");
  ASSERT_TRUE(test::hostile::writeDump(dump, {}, {}, [](hid_t file) {
    // Fixed-length strings [T = 8], every one of them invalid UTF-8.
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    const hsize_t n = 8;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t ds = H5Dcreate2(file, "token_text", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes += std::string("\xFF\xFE") + char('a' + i) + '\xC0';
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(type);
  }));
  const std::string out = dir.file("out.json");
  const RunResult r = run("outliers " + quote(dump) + " --spec int4 --top-tokens 8 --json " + quote(out));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto json = nlohmann::json::parse(test::hostile::slurpBytes(out), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  const std::string text = json["layers"][0]["heads"][0]["key"]["top_tokens"][0]["text"];
  EXPECT_EQ(text.substr(0, 6), "\xEF\xBF\xBD\xEF\xBF\xBD") << "0xFF 0xFE became two U+FFFD";
  EXPECT_EQ(text.substr(text.size() - 3), "\xEF\xBF\xBD") << "a lone 0xC0 became U+FFFD";
}

// A broken mapping showed "[json.exception.parse_error.101] parse error at line 1, column 1: …".
TEST(CliHostileInputs, BrokenMappingJsonIsExplainedWithLineAndColumn) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);
  const std::string mapping = dir.file("map.json");
  std::ofstream(mapping) << "{\n  \"key\": {\"path\": \"/k\", \"axes\": \"head,token,dim\"},\n  \"value\": \n}\n";
  expectRefused(run("info " + quote(dump) + " --mapping " + quote(mapping)),
                {mapping + ": line 4, column 1: unexpected '}'; expected"}, "mapping");
}

// `kvscope-cli --serve-dump-reader` typed by hand waited for requests that never come.
TEST(CliHostileInputs, TheInternalReaderModeTypedByHandSaysSoAndExits2) {
  for (const char* args : {"--serve-dump-reader", "--serve-dump-reader extra"}) {
    const RunResult r = run(args);
    expectRefused(r, {"--serve-dump-reader is internal"}, args);
  }
  // Even with descriptors 3 and 4 open (a shell can leave them so), a file is not the socket.
  const RunResult r = runWith("exec 3</dev/null 4</dev/null;", "--serve-dump-reader");
  expectRefused(r, {"is internal"}, "with fds 3 and 4");
}

// --- Engine strings -------------------------------------------------------------------------------

// `--engine "llama.cpp -ctk=q4_0"` was ignored ("ignored -ctk=q4_0"), so every figure was fp16.
TEST(CliHostileInputs, TheEqualsSpellingOfLlamacppCacheFlagsIsReadAndNoted) {
  test::TempDir dir;
  // D = 32: llama.cpp refuses a quantized cache type whose block (32) does not divide D.
  test::hostile::Shape shape;
  shape.dim = 32;
  const std::string dump = dir.file("d32.h5");
  ASSERT_TRUE(test::hostile::writeDump(dump, shape));
  const RunResult r = run("eval " + quote(dump) + " --engine 'llama.cpp -ctk=q4_0 -ctv=q8_0' --explain");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(has(r.out, "key:   q4_0")) << r.out;
  EXPECT_TRUE(has(r.out, "value: q8_0")) << r.out;
  EXPECT_TRUE(has(r.out, "-ctk=q4_0: read as -ctk q4_0; llama.cpp itself refuses the '=' spelling")) << r.out;
}

// --- Mapping files --------------------------------------------------------------------------------

// A 161-byte mapping with "layers": 100000000 cost 8.9 GB before its error, 99999999999 was then
// blamed on libhdf5, a 100 KB dataset path cost 2.7 GB (every prefix of it at once), a NUL in a
// path was accepted and `layers` could disagree with the file. Run under a 1 GiB address-space
// limit (not under ASan, which reserves terabytes of shadow memory).
TEST(CliHostileInputs, MappingsAreValidatedWithMemoryBoundedByTheFile) {
  test::TempDir dir;
  const std::string dump = smallDump(dir);  // /layers/0 and /layers/1
  const std::string limit = kAddressSanitizer ? "" : "ulimit -v 1048576;";
  auto mappingWith = [&](const std::string& name, const std::string& extra, const std::string& keyPath) {
    const std::string path = dir.file(name);
    std::ofstream(path) << "{\"key\": {\"path\": \"" + keyPath + "\", \"axes\": \"head,token,dim\"}, "
                           "\"value\": {\"path\": \"/layers/{layer}/value\", \"axes\": \"head,token,dim\"}" +
                               extra + "}";
    return path;
  };
  struct Case {
    std::string mapping;
    std::vector<std::string> parts;
  };
  std::string longPath = "/layers/{layer}";
  while (longPath.size() < 100000) longPath += "/a";
  const std::vector<Case> cases = {
      {mappingWith("huge.json", ", \"layers\": 100000000", "/layers/{layer}/key"),
       {"layers: 100000000 is out of range (allowed: 1 to 1000000)"}},
      {mappingWith("most.json", ", \"layers\": 1000000", "/layers/{layer}/key"),
       {"/layers/2/key: missing (the mapping says \"layers\": 1000000)"}},
      {mappingWith("wraps.json", ", \"layers\": 99999999999", "/layers/{layer}/key"),
       {"layers: 99999999999 is out of range (allowed: 1 to 1000000)"}},
      {mappingWith("fewer.json", ", \"layers\": 1", "/layers/{layer}/key"),
       {"/layers/1/key: exists, but the mapping says \"layers\": 1; it must count every layer"}},
      {mappingWith("nul.json", "", "/layers/{layer}/key\\u0000/x"), {"key.path: contains a NUL character"}},
      {mappingWith("long.json", "", longPath), {"missing", "key.path"}},
  };
  for (const Case& c : cases) {
    const RunResult r = runWith(limit, "info " + quote(dump) + " --mapping " + quote(c.mapping));
    expectRefused(r, c.parts, c.mapping);
    EXPECT_FALSE(has(r.err, "memory")) << r.err;
  }
  // The control: the same mapping without the damage opens.
  EXPECT_EQ(runWith(limit, "info " + quote(dump) + " --mapping " +
                               quote(mappingWith("ok.json", ", \"layers\": 2", "/layers/{layer}/key")))
                .exitCode,
            0);
}

// --- Memory ----------------------------------------------------------------------------------------

// `search` on a dump with D = 100000 ended in "terminate called after throwing an instance of
// 'std::bad_alloc'" (SIGABRT): a random rotation (the tq formats' when D is not a power of two)
// needs a D×D matrix. It is refused before anything is allocated, and the search goes on with
// the candidates that suit the dump.
TEST(CliHostileInputs, AHugeHeadDimIsAClearErrorNeverAnAbort) {
  test::TempDir dir;
  const std::string dump = dir.file("wide.h5");
  ASSERT_TRUE(test::hostile::writeDump(dump, {.layers = 1, .kvHeads = 1, .heads = 1, .tokens = 4, .queries = 2,
                                              .dim = 100000}));
  const RunResult explicitRandom = runWith(kAddressSanitizer ? "" : "ulimit -v 4194304;",
                                           "eval " + quote(dump) + " --key int4,rot=random --value int4");
  expectRefused(explicitRandom, {"rot=random at D = 100000", "up to D = 2048"}, "eval rot=random");
  const std::string report = dir.file("s.json");
  const RunResult search = runWith(kAddressSanitizer ? "" : "ulimit -v 4194304;",
                                   "search " + quote(dump) + " --key-budget kl_mean=1e-2 --json " + quote(report));
  EXPECT_TRUE(search.exitCode == 0 || search.exitCode == 2) << search.exitCode << "\n" << search.err;
  EXPECT_FALSE(has(search.err, "terminate called")) << search.err;
  if (search.exitCode == 0) {
    const std::string text = test::hostile::slurpBytes(report);
    EXPECT_TRUE(has(text, "rot=random at D = 100000")) << "the tq candidates are skipped, saying why";
  }
}

// A 3.8 KB sparse file declaring two 2 GiB tensors passed the memory check (each tensor alone
// fitted) and peaked at 8.3 GiB, twice the budget. The check adds up the declared layer (K and V
// twice, for their quantized copies) against what `ulimit -v` leaves.
TEST(CliHostileInputs, ASparseFileIsCheckedByWhatItDeclaresNotWhatItStores) {
  if (kAddressSanitizer) GTEST_SKIP() << "ASan reserves terabytes of address space; ulimit -v cannot apply";
  test::TempDir dir;
  const std::string dump = dir.file("sparse.h5");
  const hsize_t tokens = hsize_t{1} << 19, dim = hsize_t{1} << 10;  // [1, 2^19, 2^10] float32: 2 GiB
  ASSERT_TRUE(test::hostile::writeDump(dump, {.layers = 1, .kvHeads = 1, .heads = 1, .tokens = 8, .queries = 1, .dim = 8},
                                       [&](int, const std::string& name, test::hostile::TensorPlan& plan) {
                                         if (name != "key" && name != "value") {
                                           plan.skip = true;
                                           return;
                                         }
                                         plan.dims = {1, tokens, dim};
                                         plan.data.clear();  // no chunk is ever written
                                         plan.dcpl = H5Pcreate(H5P_DATASET_CREATE);
                                         const hsize_t chunk[3] = {1, 64, dim};
                                         H5Pset_chunk(plan.dcpl, 3, chunk);
                                       }));
  ASSERT_LT(fs::file_size(dump), 64u << 10);
  const RunResult r = runWith("ulimit -v 4194304;", "eval " + quote(dump) + " --key int4 --value int4");
  expectRefused(r, {"one layer needs 8.0 GiB as float32 (key 4.0 GiB, value 4.0 GiB", "of memory available"}, "eval");
}

// Out of memory in worker threads (OpenMP regions) ended in SIGABRT; under `ulimit -v` every
// command now ends with exit 2 and "not enough memory", whichever thread ran out.
TEST(CliHostileInputs, RunningOutOfMemoryIsExit2WithAMessage) {
  if (kAddressSanitizer) GTEST_SKIP() << "ASan reserves terabytes of address space; ulimit -v cannot apply";
  test::TempDir dir;
  const std::string dump = dir.file("big.h5");
  const RunResult made = run("synth " + quote(dump) +
                             " --layers 1 --kv-heads 8 --heads 32 --tokens 2048 --queries 256 --head-dim 128 -q");
  ASSERT_EQ(made.exitCode, 0) << made.err;
  for (const std::string& c : {"eval " + quote(dump) + " --key int4 --value int4",
                               "sensitivity " + quote(dump) + " --candidates 'int4;int8'",
                               "search " + quote(dump) + " --key-budget kl_mean=1e-2"}) {
    const RunResult r = runWith("ulimit -v 262144;", c);
    EXPECT_TRUE(r.exitCode == 0 || r.exitCode == 2) << c << ": exit " << r.exitCode << "\n" << r.err;
    EXPECT_FALSE(has(r.err, "terminate called")) << c << ": " << r.err;
    if (r.exitCode == 2) {
      EXPECT_TRUE(has(r.err, "not enough memory") || has(r.err, "of memory available")) << c << ": " << r.err;
    }
  }
}

}  // namespace
}  // namespace kvscope
