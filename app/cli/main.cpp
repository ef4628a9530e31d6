// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope-cli: batch access to everything kvscope computes.
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include "app/cli/command.h"
#include "core/util/atomic_file.h"

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

// libhdf5 1.10 is not memory-safe on crafted files: some segfault or loop forever while their
// metadata is parsed (tests/fuzz/hdf5-findings). kvscope validates everything HDF5 hands it,
// but cannot validate below HDF5, so the CLI first opens the file in a child process: a crash
// or a hang there becomes an ordinary "bad file" error here instead of killing the command.
// The CLI is single-threaded when it opens its dump, so fork() is safe at this point.
int probeTimeoutMs() {
  const char* env = std::getenv("KVSCOPE_PROBE_TIMEOUT_MS");
  if (env && *env) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end && *end == '\0' && v > 0) return static_cast<int>(v);
  }
  return 30000;
}

Status probeOpenInChild(const std::string& path, const OpenOptions& options) {
  int fds[2];
  if (::pipe(fds) != 0) return Status::ok();  // cannot probe; open directly
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::ok();
  }
  if (child == 0) {
    ::close(fds[0]);
    auto dump = Dump::open(path, options);
    if (dump) {
      // Variable-length strings live in HDF5's global heap, where the crashes found so far sit;
      // token ids and texts are small, so the probe reads them too.
      (void)(*dump)->tokens(0);
      (void)(*dump)->tokenText(0);
    }
    ::_exit(dump ? 0 : 2);  // closing the pipe tells the parent the child is done
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(probeTimeoutMs());
  bool timedOut = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (r < 0 && errno != EINTR) break;
    if (interrupted()) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      ::close(fds[0]);
      return Status::cancelled();
    }
    if (r > 0) {
      char buf[64];
      if (::read(fds[0], buf, sizeof buf) > 0) continue;
      break;  // end of file: the child is done
    }
  }
  ::close(fds[0]);
  if (timedOut) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return Status::invalidData(path + ": reading the file's metadata did not finish within " +
                               std::to_string(probeTimeoutMs() / 1000) +
                               " s (libhdf5 loops on this file); it is corrupt or hostile");
  }
  int wstatus = 0;
  while (::waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus))
    return Status::invalidData(path + ": libhdf5 crashed (signal " +
                               std::to_string(WTERMSIG(wstatus)) +
                               ") while reading the file's metadata or token texts; the file is corrupt or hostile");
  // A clean refusal in the child is repeated by the real open below, with its own status code.
  return Status::ok();
}

// The probe above covers opening; a corrupt chunk index crashes libhdf5 only when the data is
// read, possibly an hour into an eval. So every bulk read (Dump::read) is served by a helper
// process forked right after the open, while the CLI is still single-threaded and small: the
// fork costs nothing later (no page tables of a big process to copy, no copy-on-write faults)
// and no lock can be held by another thread. The helper opens the dump itself, reads each
// requested slab into an anonymous MAP_SHARED buffer sized for the largest slab (mapped once,
// so its pages fault in once) and answers over a socket. A crash or hang there becomes an
// ordinary "bad file" error here. KVSCOPE_ISOLATE_READS=0 reads in-process instead.
bool readIsolationEnabled() {
  const char* env = std::getenv("KVSCOPE_ISOLATE_READS");
  return !(env && std::string(env) == "0");
}

class ReadHelper {
 public:
  struct Request {
    int32_t layer, kind, sequence;
  };
  struct Reply {
    int32_t code;
    int64_t heads, tokens, dim;
    uint32_t messageBytes;
  };

  ~ReadHelper() {
    if (fd_ >= 0) ::close(fd_);  // the helper reads end of file and exits
    if (pid_ > 0) {
      // It exits on its own within microseconds; a helper stuck in libhdf5 is killed.
      for (int i = 0; i < 200 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(1000);
      if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    if (shared_ != nullptr) ::munmap(shared_, capacity_);
  }

  /// Forks the helper for `path`; null when isolation is off or the system refuses.
  static std::shared_ptr<ReadHelper> start(const std::string& path, const OpenOptions& options,
                                           const DumpInfo& info) {
    auto helper = std::shared_ptr<ReadHelper>(new ReadHelper);
    helper->path_ = path;
    helper->canonical_ = info.canonical;
    const int64_t kv = int64_t{info.kvHeads} * info.tokens * info.headDim;
    const int64_t q = int64_t{info.heads} * info.queries * info.headDim;
    helper->capacity_ = static_cast<size_t>(std::max<int64_t>({kv, q, 1})) * sizeof(float);
    void* shared = ::mmap(nullptr, helper->capacity_, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (shared == MAP_FAILED) return nullptr;
    helper->shared_ = shared;
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return nullptr;
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return nullptr;
    }
    if (child == 0) {
      ::close(fds[0]);
      serve(fds[1], path, options, static_cast<char*>(shared), helper->capacity_);
      ::_exit(0);
    }
    ::close(fds[1]);
    helper->fd_ = fds[0];
    helper->pid_ = child;
    return helper;
  }

  Expected<Tensor3> read(int layer, TensorKind kind, int sequence) {
    const std::string what = describe(layer, kind, sequence);
    if (!failure_.isOk()) return failure_;
    const Request request{layer, static_cast<int32_t>(kind), sequence};
    if (!sendAll(fd_, &request, sizeof request)) return died(what);
    Reply reply{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs());
    for (;;) {
      pollfd pfd{fd_, POLLIN, 0};
      const int r = ::poll(&pfd, 1, 100);
      if (interrupted()) {
        stop();
        return failure_ = Status::cancelled();
      }
      if (r > 0) break;
      if (r < 0 && errno != EINTR) return died(what);
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        return failure_ = Status::invalidData(
                   path_ + ": " + what + ": reading did not finish within " +
                   std::to_string(timeoutMs() / 1000) +
                   " s (libhdf5 loops on this file); it is corrupt or hostile");
      }
    }
    if (!receiveAll(fd_, &reply, sizeof reply)) return died(what);
    std::string message(reply.messageBytes, '\0');
    if (reply.messageBytes > 0 && !receiveAll(fd_, message.data(), message.size()))
      return died(what);
    if (reply.code != static_cast<int32_t>(StatusCode::Ok))
      return Status(static_cast<StatusCode>(reply.code), message);
    const size_t bytes = static_cast<size_t>(reply.heads * reply.tokens * reply.dim) * sizeof(float);
    if (bytes > capacity_) return Status::internal(path_ + ": " + what + ": slab exceeds the buffer");
    Tensor3 out(reply.heads, reply.tokens, reply.dim);
    std::memcpy(out.data.data(), shared_, bytes);
    return out;
  }

 private:
  ReadHelper() = default;

  /// The probe's limit plus a second per 32 MiB of the largest slab, so that a legitimate read
  /// of a huge slab from a slow disk is not mistaken for a hang.
  int timeoutMs() const {
    const int64_t ms = int64_t{probeTimeoutMs()} + static_cast<int64_t>(capacity_ >> 25) * 1000;
    return static_cast<int>(std::min<int64_t>(ms, int64_t{24} * 3600 * 1000));
  }

  std::string describe(int layer, int kind, int sequence) const {
    const char* name = tensorKindName(static_cast<TensorKind>(kind));
    std::string what = canonical_ ? "/layers/" + std::to_string(layer) + "/" + name
                                  : std::string(name) + " of layer " + std::to_string(layer);
    return sequence > 0 ? what + " (sequence " + std::to_string(sequence) + ")" : what;
  }
  std::string describe(int layer, TensorKind kind, int sequence) const {
    return describe(layer, static_cast<int>(kind), sequence);
  }

  static bool sendAll(int fd, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  static bool receiveAll(int fd, void* data, size_t n) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t r = ::recv(fd, p, n, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  /// The helper is gone: say how, once, and refuse every later read with the same message.
  Status died(const std::string& what) {
    int wstatus = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &wstatus, 0)) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (r > 0 && WIFSIGNALED(wstatus))
      return failure_ = Status::invalidData(
                 path_ + ": " + what + ": libhdf5 crashed (signal " +
                 std::to_string(WTERMSIG(wstatus)) +
                 ") while reading the data; the file is corrupt or hostile");
    return failure_ = Status::ioError(path_ + ": " + what +
                                      ": the reading process ended unexpectedly");
  }

  static void serve(int fd, const std::string& path, OpenOptions options, char* shared,
                    size_t capacity) {
    // Ctrl-C reaches the whole process group; the CLI decides and kills the helper itself.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    options.readDelegate = nullptr;
    options.serialReads = true;  // forked from a process that may run OpenMP later: none here
    auto dump = Dump::open(path, options);
    Request request{};
    while (receiveAll(fd, &request, sizeof request)) {
      Reply reply{};
      std::string message;
      Status st;
      if (!dump) {
        st = dump.status();
      } else {
        auto shape = (*dump)->readInto(request.layer, static_cast<TensorKind>(request.kind),
                                       request.sequence, reinterpret_cast<float*>(shared),
                                       static_cast<int64_t>(capacity / sizeof(float)));
        if (!shape) {
          st = shape.status();
        } else {
          reply.heads = (*shape)[0];
          reply.tokens = (*shape)[1];
          reply.dim = (*shape)[2];
        }
      }
      reply.code = static_cast<int32_t>(st.code());
      message = st.message();
      reply.messageBytes = static_cast<uint32_t>(message.size());
      if (!sendAll(fd, &reply, sizeof reply) || !sendAll(fd, message.data(), message.size()))
        return;
    }
  }

  std::string path_;
  bool canonical_ = true;
  pid_t pid_ = -1;
  int fd_ = -1;
  void* shared_ = nullptr;
  size_t capacity_ = 0;
  Status failure_;
};

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
  KVS_RETURN_IF_ERROR(probeOpenInChild(path, options));
  if (!readIsolationEnabled()) return Dump::open(path, options);
  // The helper is sized from the opened dump, so the delegate finds it (or, where the system
  // refused to start one, an in-process reader) only once the open has succeeded.
  struct Readers {
    std::mutex turn;  // reads from several threads (core's OpenMP) take turns
    std::shared_ptr<ReadHelper> helper;
    std::shared_ptr<const Dump> inProcess;
  };
  auto readers = std::make_shared<Readers>();
  const OpenOptions plain = options;
  options.readDelegate = [readers](int layer, TensorKind kind, int sequence) -> Expected<Tensor3> {
    std::lock_guard<std::mutex> lock(readers->turn);
    if (readers->helper) return readers->helper->read(layer, kind, sequence);
    return readers->inProcess->read(layer, kind, sequence);
  };
  auto dump = Dump::open(path, options);
  if (!dump) return dump.status();
  readers->helper = ReadHelper::start(path, plain, (*dump)->info());
  if (!readers->helper) {
    auto fallback = Dump::open(path, plain);
    if (!fallback) return fallback.status();
    readers->inProcess = std::move(*fallback);
  }
  return dump;
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
  const bool specs = !c.key.empty() || !c.value.empty();
  const int ways = (specs ? 1 : 0) + (c.preset.empty() ? 0 : 1) + (c.engine.empty() ? 0 : 1);
  if (ways > 1) {
    return Status::invalidArgument("give one of --key and --value, --preset or --engine, not both");
  }
  ResolvedPlans out;
  if (!c.preset.empty() || !c.engine.empty()) {
    const bool isPreset = !c.preset.empty();
    auto r = isPreset ? resolvePreset(c.preset, shape) : resolveEngine(c.engine, shape);
    if (!r) return isPreset ? r.status() : r.status().withContext("--engine");
    out.label = isPreset ? c.preset : c.engine;
    auto parsed = parseResolvedPlans(*r, isPreset ? "preset " + c.preset : "--engine '" + c.engine + "'");
    if (!parsed) return parsed.status();
    out.plans = *parsed;
    out.strings = std::move(*r);
    return out;
  }
  if (c.key.empty() || c.value.empty())
    return Status::invalidArgument("give both --key SPEC and --value SPEC (a spec or a plan), --preset NAME "
                                   "(run 'kvscope-cli presets' for the list) or --engine \"ENGINE FLAGS\"");
  auto k = parsePlan(c.key);
  if (!k) return k.status().withContext("--key");
  auto v = parsePlan(c.value);
  if (!v) return v.status().withContext("--value");
  out.plans = KvPlans{*k, *v};
  out.strings = ResolvedKv{c.key, c.value, {}};
  return out;
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
  for (const std::string& n : r.strings.notes) out += "  " + n + "\n";
  return out;
}

void printNotes(const ResolvedPlans& r) {
  for (const std::string& n : r.strings.notes) std::cerr << "kvscope-cli: note: " << n << "\n";
}

Expected<std::vector<int>> parseLayerList(const std::string& text, int layers) {
  std::vector<int> out;
  if (text.empty() || text == "all") {
    for (int l = 0; l < layers; ++l) out.push_back(l);
    return out;
  }
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("--layers '" + text + "': " + why +
                                   " (allowed: 'all' or a list like 0,2,5-7 with layers 0.." +
                                   std::to_string(layers - 1) + ")");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) return bad("empty item");
    size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int l = std::stoi(item, &used);
        if (used != item.size()) return bad("'" + item + "' is not a number");
        if (l < 0 || l >= layers) return bad("layer " + item + " does not exist");
        out.push_back(l);
      } else {
        std::string a = item.substr(0, dash), b = item.substr(dash + 1);
        size_t ua = 0, ub = 0;
        int la = std::stoi(a, &ua), lb = std::stoi(b, &ub);
        if (ua != a.size() || ub != b.size()) return bad("'" + item + "' is not a range");
        if (la < 0 || lb >= layers || la > lb) return bad("range " + item + " is out of bounds");
        for (int l = la; l <= lb; ++l) out.push_back(l);
      }
    } catch (const std::exception&) {
      return bad("'" + item + "' is not a number or range");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

namespace {
volatile std::sig_atomic_t gInterrupted = 0;
// The first SIGINT/SIGTERM asks long work to stop cleanly (it checks interrupted() through its
// Progress callback, removes temporary files and exits 130). A second one, for work stuck where
// no callback runs (inside libhdf5 on a hostile file), ends the process at once.
extern "C" void onSigint(int sig) {
  if (gInterrupted) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  gInterrupted = 1;
}
}  // namespace

bool interrupted() { return gInterrupted != 0; }

Progress cancellationProgress() {
  return [](double, std::string_view) { return !interrupted(); };
}

}  // namespace kvscope::cli

int main(int argc, char** argv) {
  using namespace kvscope::cli;
  std::signal(SIGINT, onSigint);
  std::signal(SIGTERM, onSigint);
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
  try {
    return run();
  } catch (const std::bad_alloc&) {
    std::cerr << "kvscope-cli: out of memory\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kvscope-cli: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}
