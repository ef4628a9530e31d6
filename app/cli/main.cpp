// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope-cli: batch access to everything kvscope computes.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <memory>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <thread>

#include "app/cli/command.h"
#include "core/io/isolated_reader.h"
#include "core/util/atomic_file.h"
#include "core/util/temporary_files.h"

namespace kvscope::cli {

std::vector<CommandDef>& commandRegistry() {
  static std::vector<CommandDef> registry;
  return registry;
}

int exitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::Ok: return kExitOk;
    case StatusCode::Cancelled: return kExitCancelled;
    case StatusCode::Internal: return kExitInternal;
    default: return kExitBadInput;
  }
}

int fail(const Status& status) {
  std::cerr << "kvscope-cli: " << status.message() << "\n";
  return exitCodeFor(status);
}

namespace {

/// This executable, for starting it again as the reader; empty when unknown (read in-process).
std::string selfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

Expected<std::shared_ptr<const Dump>> openDump(const std::string& path, const std::string& mappingPath,
                                               bool allowExternal) {
  OpenOptions options;
  options.allowExternalStorage = allowExternal;
  if (!mappingPath.empty()) {
    auto mapping = loadMapping(mappingPath);
    if (!mapping) return mapping.status();
    options.mapping = std::move(*mapping);
  }
  // libhdf5 1.10 is not memory-safe on crafted files: some segfault or loop forever while their
  // metadata is parsed (tests/fuzz/hdf5-findings), a lying chunk index only when the data is
  // read, possibly an hour into an eval. So the dump is opened and read by a reader process
  // (core/io/isolated_reader.h): this executable again, in its reader mode.
  options.isolation = isolationFromEnvironment(selfPath());
  options.isolation.cancelled = [] { return interrupted(); };
  return Dump::open(path, options);
}

Status writeOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::ok() : Status::ioError("standard output: write failed");
  }
  return writeFileAtomic(path, text);
}

void addEngineOptions(CLI::App& sub, SpecChoice& choice) {
  sub.add_option("--engine", choice.engine,
                 "an engine's own flags instead of --key/--value, e.g. \"llama.cpp -ctk q4_0 -ctv q8_0\" "
                 "(docs/engines.md)");
  sub.add_flag("--explain", choice.explain,
               "print what --preset or --engine resolves to for this dump, and why, then stop");
}

Expected<ResolvedPlans> resolvePlans(const SpecChoice& c, const KvShape& shape) {
  return resolveSetting(SettingText{c.key, c.value, c.preset, c.engine}, shape);
}

std::string explainText(const SpecChoice& c, const ResolvedPlans& r, const KvShape& shape) {
  std::string out;
  if (!c.engine.empty()) {
    out += "engine: " + c.engine + "\n";
  } else if (!c.preset.empty()) {
    out += "preset: " + c.preset + "\n";
  }
  out += "for D = " + std::to_string(shape.headDim) + ", " + std::to_string(shape.kvHeads) + " kv heads, " +
         std::to_string(shape.layers) + " layers:\n";
  out += "key:   " + toString(r.plans.key) + "\n";
  out += "value: " + toString(r.plans.value) + "\n";
  if (!r.strings.query.empty()) out += "query: " + r.strings.query + " (what the engine rounds Q to; e2e applies it, eval keeps Q exact)\n";
  for (const std::string& n : r.strings.notes) out += "  " + n + "\n";
  return out;
}

void printNotes(const ResolvedPlans& r) {
  for (const std::string& n : r.strings.notes) std::cerr << "kvscope-cli: note: " << n << "\n";
}

namespace {

/// The options naming files, per subcommand, for checkPaths.
struct PathOption {
  CLI::App* app;
  CLI::Option* option;
  const std::string* path;
  bool output;
  bool stdoutAllowed;
};

std::vector<PathOption>& pathOptions() {
  static std::vector<PathOption> options;
  return options;
}

std::string shown(const CLI::Option* option, const std::string& path) {
  const std::string name = option->get_name(false, true);
  return (name.rfind('-', 0) == 0 ? name + " " : "") + (path.empty() ? "''" : path);
}

/// Refuses an output that cannot be written, before any work: an empty name, a folder, a missing
/// or read-only folder, or a file that is also one of the command's inputs (device and inode).
Status checkOutput(const PathOption& out, const std::vector<const PathOption*>& inputs) {
  const std::string& path = *out.path;
  const std::string name = shown(out.option, path);
  if (path.empty())
    return Status::invalidArgument(name + ": an empty file name (give a file" +
                                   std::string(out.stdoutAllowed ? ", or '-' for standard output)" : ")"));
  if (path == "-" && out.stdoutAllowed) return Status::ok();
  namespace fs = std::filesystem;
  struct stat target {};
  const bool exists = ::stat(path.c_str(), &target) == 0;
  if (exists && S_ISDIR(target.st_mode)) return Status::invalidArgument(name + ": is a folder; give a file name");
  if (exists) {
    for (const PathOption* in : inputs) {
      struct stat st {};
      if (in->path->empty() || ::stat(in->path->c_str(), &st) != 0) continue;
      if (st.st_dev == target.st_dev && st.st_ino == target.st_ino)
        return Status::invalidArgument(name + ": is the same file as the input " + shown(in->option, *in->path) +
                                       "; writing it would destroy the input (choose another file)");
    }
    if (!S_ISREG(target.st_mode)) return Status::ok();  // a pipe or a device is written in place
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  struct stat dir {};
  if (::stat(folder.c_str(), &dir) != 0) return Status::ioError(name + ": folder " + folder + " does not exist");
  if (!S_ISDIR(dir.st_mode)) return Status::ioError(name + ": " + folder + " is not a folder");
  // The output is written beside the target and renamed into place: the folder must be writable.
  if (::access(folder.c_str(), W_OK) != 0)
    return Status::ioError(name + ": cannot write in folder " + folder + ": " + std::strerror(errno));
  return Status::ok();
}

/// Checks every file option of the subcommand that will run (see addOutputOption).
Status checkPaths() {
  std::vector<const PathOption*> inputs, outputs;
  for (const PathOption& p : pathOptions()) {
    if (!p.app->parsed() || p.option->count() == 0) continue;
    (p.output ? outputs : inputs).push_back(&p);
  }
  for (const PathOption* out : outputs) KVS_RETURN_IF_ERROR(checkOutput(*out, inputs));
  return Status::ok();
}

}  // namespace

CLI::Validator numberCheck(const std::string& allowed, std::function<bool(double)> ok) {
  return CLI::Validator(
      [allowed, ok](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(v) || !ok(v))
          return "'" + text + "' is not allowed (allowed: " + allowed + ")";
        return {};
      },
      allowed);
}

CLI::Validator wholeNumberCheck(long long min, unsigned long long max) {
  const std::string allowed = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, allowed](std::string& text) -> std::string {
        const char* first = text.data();
        const char* end = text.data() + text.size();
        bool ok = false;
        if (!text.empty() && text[0] == '-') {
          long long v = 0;
          auto [p, ec] = std::from_chars(first, end, v);
          ok = ec == std::errc() && p == end && v >= min;
        } else {
          unsigned long long v = 0;
          auto [p, ec] = std::from_chars(first + (!text.empty() && text[0] == '+' ? 1 : 0), end, v);
          ok = ec == std::errc() && p == end && v <= max && (min <= 0 || v >= static_cast<unsigned long long>(min));
        }
        if (!ok) return "'" + text + "' is not allowed (allowed: " + allowed + ")";
        return {};
      },
      allowed);
}

CLI::Option* addOutputOption(CLI::App& sub, const std::string& name, std::string& path, const std::string& help,
                             bool stdoutAllowed) {
  CLI::Option* option = sub.add_option(name, path, help);
  pathOptions().push_back({&sub, option, &path, true, stdoutAllowed});
  return option;
}

CLI::Option* addInputOption(CLI::App& sub, const std::string& name, std::string& path, const std::string& help) {
  CLI::Option* option = sub.add_option(name, path, help);
  pathOptions().push_back({&sub, option, &path, false, false});
  return option;
}

namespace {

volatile std::sig_atomic_t gInterrupted = 0;
int gSignalPipe[2] = {-1, -1};

/// How long work may take to stop by itself after SIGINT/SIGTERM (it polls interrupted() at
/// least every few hundred milliseconds; docs/reliability.md has the measured latencies).
constexpr int kStopGraceMs = 5000;

// The first SIGINT/SIGTERM asks long work to stop cleanly: it checks interrupted() through its
// Progress callback, removes its temporary files and exits 130. The signal watcher below ends a
// process that does not stop by itself (blocked in a system call, stuck inside libhdf5).
extern "C" void onSignal(int sig) {
  gInterrupted = 1;
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(sig);
  if (gSignalPipe[1] >= 0 && ::write(gSignalPipe[1], &byte, 1) < 0) {
    // Nothing to do in a signal handler; the flag is set.
  }
  errno = saved;
}

/// Waits for a signal, then for the process to stop within kStopGraceMs or for a second signal;
/// then removes the temporary files in flight and ends the process with the signal's default
/// action (killed by SIGINT or SIGTERM, as the shell expects).
void watchSignals() {
  unsigned char sig = 0;
  while (::read(gSignalPipe[0], &sig, 1) != 1) {
  }
  pollfd second{gSignalPipe[0], POLLIN, 0};
  while (::poll(&second, 1, kStopGraceMs) < 0 && errno == EINTR) {
  }
  removeTemporaryFiles();
  const char message[] = "kvscope-cli: interrupted; the work did not stop by itself, ending it\n";
  if (::write(STDERR_FILENO, message, sizeof message - 1) < 0) {
    // stderr is gone; end anyway.
  }
  std::signal(sig, SIG_DFL);
  ::kill(::getpid(), sig);
}

void installSignalHandlers() {
  if (::pipe2(gSignalPipe, O_CLOEXEC) != 0) {
    gSignalPipe[0] = gSignalPipe[1] = -1;
  } else {
    std::thread(watchSignals).detach();
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

/// What the command works on, for "not enough memory for …" (set before it runs).
char gMemoryContext[256] = "this command";

void writeStderr(const char* text) {
  if (::write(STDERR_FILENO, text, std::strlen(text)) < 0) {
    // stderr is gone.
  }
}

/// The message for a failed allocation, wherever it happened.
void reportNoMemory() {
  writeStderr("kvscope-cli: not enough memory for ");
  writeStderr(gMemoryContext);
  writeStderr(" (an allocation failed: the input needs more memory than is available here, ulimit -v "
              "included; fewer layers, a smaller dump or more memory)\n");
}

/// Set by the new-handler: an allocation through operator new failed (and threw bad_alloc).
std::atomic<bool> gAllocationFailed{false};

void onNewFailure() {
  gAllocationFailed = true;
  throw std::bad_alloc();
}

// An exception nobody caught: thrown in a worker thread (an OpenMP region, a std::thread) or
// through a noexcept function. Out of memory there is the input's size, not a bug: exit 2 with a
// message instead of SIGABRT. Anything else is a bug: exit 1 with what it says.
//
// An exception leaving an OpenMP region reaches std::terminate without being caught (GCC's
// region calls it from its landing pad), so current_exception() is empty there: a failed
// allocation is then recognised by the new-handler's flag (operator new) or by errno ENOMEM,
// which a failed malloc leaves on the throwing thread (Eigen's and C allocations).
[[noreturn]] void onTerminate() {
  const bool enomem = errno == ENOMEM;
  removeTemporaryFiles();
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      reportNoMemory();
      ::_exit(kExitBadInput);
    } catch (const std::exception& x) {
      writeStderr("kvscope-cli: internal error: ");
      writeStderr(x.what());
      writeStderr("\n");
      ::_exit(kExitInternal);
    } catch (...) {
    }
  }
  if (gAllocationFailed || enomem) {
    reportNoMemory();
    ::_exit(kExitBadInput);
  }
  writeStderr("kvscope-cli: internal error: terminated\n");
  ::_exit(kExitInternal);
}

/// The reader mode is started by kvscope itself (core/io/isolated_reader.h) with a socket on
/// descriptor 3, shared memory on 4 and standard input from /dev/null; typed at a terminal it
/// would wait for requests that never come.
bool startedAsReader() {
  struct stat st {};
  return ::isatty(STDIN_FILENO) == 0 && ::fstat(3, &st) == 0 && S_ISSOCK(st.st_mode) && ::fstat(4, &st) == 0 &&
         S_ISREG(st.st_mode);
}

}  // namespace

bool interrupted() { return gInterrupted != 0; }

Progress cancellationProgress() {
  return [](double, std::string_view) { return !interrupted(); };
}

Progress cliProgress(const std::string& command, bool terminalOnly) {
  // On a terminal one line, rewritten as the work goes on (at most four times a second: synth
  // --layers 100000 reports per layer); elsewhere one line each time the phase or the tenth of
  // the work changes, so a log shows progress without flooding.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (!tty && terminalOnly) return cancellationProgress();
  struct Line {
    std::string what;
    int tenth = -1;
    std::chrono::steady_clock::time_point drawn{};
    bool open = false;  // a terminal line drawn and not yet ended
    ~Line() {
      if (open) std::cerr << "\r\033[K" << std::flush;
    }
  };
  auto last = std::make_shared<Line>();
  return [command, tty, last](double fraction, std::string_view what) {
    if (interrupted()) return false;
    if (fraction < 0) return true;
    const int percent = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100));
    const int tenth = percent / 10;
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      if (!last->open || percent >= 100 || now - last->drawn >= std::chrono::milliseconds(250)) {
        std::cerr << "\r\033[K" << command << ": " << what << " " << percent << "%" << (percent >= 100 ? "\n" : "")
                  << std::flush;
        last->drawn = now;
        last->open = percent < 100;
      }
    } else if (last->what != what || last->tenth != tenth) {
      std::cerr << command << ": " << what << " " << percent << "%\n";
    }
    last->what = std::string(what);
    last->tenth = tenth;
    return true;
  };
}

}  // namespace kvscope::cli

int main(int argc, char** argv) {
  using namespace kvscope::cli;
  if (argc >= 2 && std::strcmp(argv[1], kvscope::kReaderArgument) == 0) {
    if (argc != 2 || !startedAsReader()) {
      std::fprintf(stderr, "kvscope-cli: %s is internal: kvscope starts it to read a dump in a separate process; "
                           "it is not a command (run 'kvscope-cli --help')\n", kvscope::kReaderArgument);
      return kExitBadInput;
    }
    return kvscope::serveDumpReader();
  }
  installSignalHandlers();
  std::set_terminate(onTerminate);
  std::set_new_handler(onNewFailure);
  CLI::App app{"kvscope-cli: measure what KV-cache quantization does to attention", "kvscope-cli"};
  app.set_version_flag("--version", std::string("kvscope ") + KVSCOPE_VERSION);
  app.require_subcommand(1);
  std::function<int()> run;
  auto& registry = commandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const CommandDef& a, const CommandDef& b) { return a.name < b.name; });
  for (auto& def : registry) {
    CLI::App* sub = app.add_subcommand(def.name, def.help);
    auto runner = def.setup(*sub);
    sub->callback([&run, runner] { run = runner; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvscope-cli: " << e.what() << "\n(run 'kvscope-cli --help' for usage)\n";
    return kExitBadInput;
  }
  if (!run) return kExitInternal;
  // Outputs that cannot be written are refused before the work, not after it.
  if (kvscope::Status s = checkPaths(); !s.isOk()) return fail(s);
  for (CLI::App* sub : app.get_subcommands()) {
    std::string context = sub->get_name();
    for (const std::string& arg : sub->remaining()) context += " " + arg;
    for (const CLI::Option* opt : sub->get_options())
      if (opt->get_positional() && opt->count() > 0) context += " " + opt->as<std::string>();
    std::snprintf(gMemoryContext, sizeof gMemoryContext, "'%s'", context.c_str());
  }
  int code = kExitInternal;
  try {
    code = run();
  } catch (const std::bad_alloc&) {
    reportNoMemory();
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kvscope-cli: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  // A report lost on its way to standard output (a full disk, /dev/full, a closed pipe) is a
  // failure, even when the command itself succeeded.
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout) {
    const int err = errno;
    std::cerr << "kvscope-cli: standard output: cannot write" << (err != 0 ? std::string(": ") + std::strerror(err) : "")
              << "\n";
    return code == kExitOk ? kExitBadInput : code;
  }
  return code;
}
