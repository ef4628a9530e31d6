// SPDX-License-Identifier: GPL-3.0-or-later
// The reader is exec'd, not forked: the GUI is multi-threaded (a fork of it may inherit a lock
// another thread held) and sanitizer runtimes dislike forks of big processes. posix_spawn starts
// a fresh kvscope-cli whose own OpenMP and libhdf5 state belong to it alone.
#include "core/io/isolated_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <new>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <type_traits>

#include "core/io/mapping.h"

extern char** environ;

namespace kvscope {
namespace {

constexpr int kSocketFd = 3;
constexpr int kMemoryFd = 4;

enum class Op : uint32_t { Open = 1, Read, Tokens, TokenText, Stored, Logits, ReadHeads };

// ---- Messages: a u64 length, then fields in native byte order (both ends are one machine). ----

class Writer {
 public:
  template <typename T>
  Writer& put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Writer& str(const std::string& s) {
    put<uint64_t>(s.size());
    buf_ += s;
    return *this;
  }
  Writer& bytes(const void* p, size_t n) {
    put<uint64_t>(n);
    buf_.append(static_cast<const char*>(p), n);
    return *this;
  }
  Writer& status(const Status& st) {
    put<int32_t>(static_cast<int32_t>(st.code()));
    return str(st.message());
  }
  [[nodiscard]] const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  template <typename T>
  T get() {
    T v{};
    if (pos_ + sizeof v > s_.size()) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, s_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    if (!ok_ || n > s_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string out = s_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  Status status() {
    const auto code = get<int32_t>();
    std::string message = str();
    return code == 0 ? Status::ok() : Status(static_cast<StatusCode>(code), std::move(message));
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void writeInfo(Writer& w, const DumpInfo& i) {
  w.str(i.path).str(i.model);
  for (int v : {i.layers, i.kvHeads, i.heads, i.tokens, i.queries, i.headDim, i.sequences}) w.put<int32_t>(v);
  w.str(i.dtype);
  for (bool b : {i.hasQuery, i.hasKeyPreRope, i.hasTokens, i.hasTokenText, i.hasLogits, i.canonical})
    w.put<uint8_t>(b);
  w.put<double>(i.ropeTheta).put<int32_t>(static_cast<int32_t>(i.ropeStyle)).put<double>(i.softmaxScale);
  w.str(i.modelPath).put<uint64_t>(i.warnings.size());
  for (const auto& s : i.warnings) w.str(s);
  w.put<uint64_t>(i.ropeInvFreq.size());
  for (double v : i.ropeInvFreq) w.put<double>(v);
}

DumpInfo readInfo(Parser& p) {
  DumpInfo i;
  i.path = p.str();
  i.model = p.str();
  for (int* v : {&i.layers, &i.kvHeads, &i.heads, &i.tokens, &i.queries, &i.headDim, &i.sequences})
    *v = p.get<int32_t>();
  i.dtype = p.str();
  for (bool* b : {&i.hasQuery, &i.hasKeyPreRope, &i.hasTokens, &i.hasTokenText, &i.hasLogits, &i.canonical})
    *b = p.get<uint8_t>() != 0;
  i.ropeTheta = p.get<double>();
  i.ropeStyle = static_cast<RopeStyle>(p.get<int32_t>());
  i.softmaxScale = p.get<double>();
  i.modelPath = p.str();
  const auto n = p.get<uint64_t>();
  for (uint64_t k = 0; k < n && p.ok(); ++k) i.warnings.push_back(p.str());
  const auto pairs = p.get<uint64_t>();
  for (uint64_t k = 0; k < pairs && p.ok(); ++k) i.ropeInvFreq.push_back(p.get<double>());
  return i;
}

bool sendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool sendFrame(int fd, const std::string& body) {
  const uint64_t n = body.size();
  return sendAll(fd, reinterpret_cast<const char*>(&n), sizeof n) && sendAll(fd, body.data(), body.size());
}

// Blocking receive (the reader's side: it has nothing else to do).
bool receiveAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool receiveFrame(int fd, std::string& body) {
  uint64_t n = 0;
  if (!receiveAll(fd, reinterpret_cast<char*>(&n), sizeof n)) return false;
  body.resize(n);
  return receiveAll(fd, body.data(), n);
}

std::string seconds(int ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  return buf;
}

/// A positive integer from the environment (a time in ms, a size in MiB), else `fallback`.
int envPositive(const char* name, int fallback) {
  const char* env = std::getenv(name);
  if (env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end && *end == '\0' && v > 0 && v < (1L << 30)) return static_cast<int>(v);
  }
  return fallback;
}

/// Bytes of the largest tensor one read returns: the shared memory's size.
size_t largestSlabBytes(const DumpInfo& info) {
  const int64_t kv = int64_t{info.kvHeads} * info.tokens * info.headDim;
  const int64_t q = int64_t{info.heads} * info.queries * info.headDim;
  return static_cast<size_t>(std::max<int64_t>({kv, q, 1})) * sizeof(float);
}

// ---- The reader process ----

struct Server {
  std::shared_ptr<const Dump> dump;
  Status openStatus = Status::internal("the reader was asked to read before opening");
  float* shared = nullptr;
  size_t sharedBytes = 0;
  std::optional<int> hangLayer;  // tests only: KVSCOPE_TEST_READER_HANG_LAYER
  int slowMsPerHead = 0;         // tests only: KVSCOPE_TEST_READER_SLOW_MS, a slow disk's stand-in
};

// Tests only: a tensor read of `shape` takes at least slowMsPerHead ms per head it returns.
void actSlow(const Server& server, const Expected<std::array<int64_t, 3>>& shape) {
  if (server.slowMsPerHead > 0 && shape)
    std::this_thread::sleep_for(std::chrono::milliseconds(server.slowMsPerHead * (*shape)[0]));
}

void serveOpen(Server& server, Parser& in, Writer& out) {
  const std::string path = in.str();
  const std::string mappingJson = in.str();
  const std::string mappingOrigin = in.str();
  OpenOptions options;
  options.allowExternalStorage = in.get<uint8_t>() != 0;
  if (!mappingJson.empty()) {
    auto mapping = parseMapping(mappingJson, mappingOrigin);
    if (!mapping) {
      out.status(mapping.status());
      return;
    }
    options.mapping = std::move(*mapping);
  }
  auto dump = Dump::open(path, options);
  if (!dump) {
    server.openStatus = dump.status();
    out.status(dump.status());
    return;
  }
  // Variable-length strings live in HDF5's global heap, where crashes found so far sit; token
  // ids and texts are small, so the open reads them too, inside the open's time limit.
  (void)(*dump)->tokens(0);
  (void)(*dump)->tokenText(0);
  const size_t bytes = largestSlabBytes((*dump)->info());
  if (::ftruncate(kMemoryFd, static_cast<off_t>(bytes)) != 0) {
    out.status(Status::resourceLimit(path + ": cannot size the reader's shared memory (" +
                                     std::to_string(bytes >> 20) + " MiB): " + std::strerror(errno)));
    return;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, kMemoryFd, 0);
  if (p == MAP_FAILED) {
    out.status(Status::resourceLimit(path + ": cannot map the reader's shared memory: " + std::strerror(errno)));
    return;
  }
  server.shared = static_cast<float*>(p);
  server.sharedBytes = bytes;
  server.dump = std::move(*dump);
  server.openStatus = Status::ok();
  out.status(Status::ok());
  writeInfo(out, server.dump->info());
}

void serveRequest(Server& server, Op op, Parser& in, Writer& out) {
  if (!server.dump) {
    out.status(server.openStatus);
    return;
  }
  const Dump& dump = *server.dump;
  switch (op) {
    case Op::Read: {
      const auto layer = in.get<int32_t>();
      const auto kind = static_cast<TensorKind>(in.get<int32_t>());
      const auto sequence = in.get<int32_t>();
      if (layer == server.hangLayer)
        for (;;) ::pause();  // a stand-in for libhdf5 looping on a hostile chunk index
      auto shape = dump.readInto(layer, kind, sequence, server.shared,
                                 static_cast<int64_t>(server.sharedBytes / sizeof(float)));
      actSlow(server, shape);
      out.status(shape.status());
      if (shape)
        for (int64_t v : *shape) out.put<int64_t>(v);
      return;
    }
    case Op::ReadHeads: {
      const auto layer = in.get<int32_t>();
      const auto kind = static_cast<TensorKind>(in.get<int32_t>());
      const auto sequence = in.get<int32_t>();
      const auto first = in.get<int64_t>();
      const auto count = in.get<int64_t>();
      if (layer == server.hangLayer)
        for (;;) ::pause();
      auto shape = dump.readHeadsInto(layer, kind, first, count, sequence, server.shared,
                                      static_cast<int64_t>(server.sharedBytes / sizeof(float)));
      actSlow(server, shape);
      out.status(shape.status());
      if (shape)
        for (int64_t v : *shape) out.put<int64_t>(v);
      return;
    }
    case Op::Tokens: {
      auto t = dump.tokens(in.get<int32_t>());
      out.status(t.status());
      if (t) out.bytes(t->data(), t->size() * sizeof(int64_t));
      return;
    }
    case Op::TokenText: {
      auto t = dump.tokenText(in.get<int32_t>());
      out.status(t.status());
      if (t) {
        out.put<uint64_t>(t->size());
        for (const auto& s : *t) out.str(s);
      }
      return;
    }
    case Op::Stored: {
      const auto layer = in.get<int32_t>();
      auto s = dump.storedData(layer, static_cast<TensorKind>(in.get<int32_t>()));
      out.status(s.status());
      if (s) {
        out.put<int64_t>(s->declaredBytes).put<int64_t>(s->storedBytes).put<int64_t>(s->chunks);
        out.put<int64_t>(s->storedChunks).put<uint8_t>(s->everySequence).put<uint8_t>(s->listTruncated);
        out.bytes(s->sequences.data(), s->sequences.size() * sizeof(int));
      }
      return;
    }
    case Op::Logits: {
      auto l = dump.logits(in.get<int32_t>());
      out.status(l.status());
      if (l) out.bytes(l->data(), l->size() * sizeof(float));
      return;
    }
    case Op::Open: break;
  }
  out.status(Status::internal("the reader got an unknown request"));
}

// ---- The client's waits ----

enum class Wait { Ready, TimedOut, Cancelled, Closed };

using Clock = std::chrono::steady_clock;

Wait waitReadable(int fd, Clock::time_point deadline, const std::function<bool()>& cancelled) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Wait::TimedOut;
    pollfd pfd{fd, POLLIN, 0};
    // Short slices only when someone may cancel; otherwise sleep until data or the deadline.
    const int slice = cancelled ? static_cast<int>(std::min<long long>(left, 100))
                                : static_cast<int>(std::min<long long>(left, 1 << 30));
    const int r = ::poll(&pfd, 1, slice);
    if (r < 0 && errno != EINTR) return Wait::Closed;
    if (r > 0) return (pfd.revents & POLLIN) ? Wait::Ready : Wait::Closed;
    if (cancelled && cancelled()) return Wait::Cancelled;
  }
}

Wait receiveBefore(int fd, char* p, size_t n, Clock::time_point deadline,
                   const std::function<bool()>& cancelled) {
  while (n > 0) {
    const Wait w = waitReadable(fd, deadline, cancelled);
    if (w != Wait::Ready) return w;
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return Wait::Closed;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Wait::Ready;
}

/// Moves `fd` above the descriptors the child gets (3, 4), so that posix_spawn's dup2 never
/// meets source == target (which would leave close-on-exec set).
int above(int fd) {
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 16);
  ::close(fd);
  return moved;
}

}  // namespace

int serveDumpReader() {
  // Ctrl-C reaches the whole process group; the client decides and stops the reader itself.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  if (::fcntl(kSocketFd, F_GETFD) < 0 || ::fcntl(kMemoryFd, F_GETFD) < 0) {
    std::fprintf(stderr, "%s is started by kvscope itself, not by hand\n", kReaderArgument);
    return 2;
  }
  // A reader stuck in libhdf5 never sees its socket close; this thread ends it with its parent.
  const pid_t parent = ::getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (::getppid() != parent) ::_exit(0);
    }
  }).detach();
  Server server;
  if (const char* hang = std::getenv("KVSCOPE_TEST_READER_HANG_LAYER"); hang && *hang)
    server.hangLayer = std::atoi(hang);
  if (const char* slow = std::getenv("KVSCOPE_TEST_READER_SLOW_MS"); slow && *slow)
    server.slowMsPerHead = std::max(0, std::atoi(slow));
  std::string frame;
  while (receiveFrame(kSocketFd, frame)) {
    Parser in(frame);
    const auto op = static_cast<Op>(in.get<uint32_t>());
    Writer out;
    if (op == Op::Open)
      serveOpen(server, in, out);
    else
      serveRequest(server, op, in, out);
    if (!sendFrame(kSocketFd, out.data())) break;
  }
  return 0;
}

IsolationOptions isolationFromEnvironment(const std::string& executable) {
  IsolationOptions out;
  const char* env = std::getenv("KVSCOPE_ISOLATE_READS");
  if (env && std::string(env) == "0") return out;
  out.executable = executable;
  out.openTimeoutMs = out.readTimeoutMs = envPositive("KVSCOPE_PROBE_TIMEOUT_MS", 30000);
  return out;
}

struct IsolatedReader::Reply {
  std::string body;
};

Expected<std::shared_ptr<IsolatedReader>> IsolatedReader::start(const std::string& path,
                                                                 const OpenOptions& options) {
  auto reader = std::shared_ptr<IsolatedReader>(new IsolatedReader);
  reader->path_ = path;
  reader->isolation_ = options.isolation;
  // KVSCOPE_READ_PIECE_MIB=N: whole reads in pieces of N MiB; 0: one request per tensor (to measure).
  if (const char* piece = std::getenv("KVSCOPE_READ_PIECE_MIB"); piece != nullptr && std::string(piece) == "0")
    reader->pieceBytes_.store(std::numeric_limits<int64_t>::max());
  else
    reader->pieceBytes_.store(int64_t{envPositive("KVSCOPE_READ_PIECE_MIB", static_cast<int>(kReadPieceBytes >> 20))} << 20);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::Open)).str(path);
  w.str(options.mapping ? mappingToJson(*options.mapping) : std::string());
  w.str(options.mapping ? options.mapping->origin : std::string());
  w.put<uint8_t>(options.allowExternalStorage);
  reader->openRequest_ = w.data();
  std::lock_guard<Turns> lock(reader->turn_);
  KVS_RETURN_IF_ERROR(reader->spawnAndOpen());
  return reader;
}

IsolatedReader::~IsolatedReader() {
  if (socket_ >= 0) {
    ::close(socket_);  // the reader reads end of file and exits
    socket_ = -1;
  }
  if (pid_ > 0) {
    // It exits on its own within microseconds; a reader stuck in libhdf5 is killed.
    for (int i = 0; i < 200 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(1000);
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) stop();
  }
  if (shared_ != nullptr) ::munmap(shared_, sharedBytes_);
  if (memory_ >= 0) ::close(memory_);
}

pid_t IsolatedReader::pid() const {
  std::lock_guard<Turns> lock(turn_);
  return pid_;
}

int IsolatedReader::starts() const {
  std::lock_guard<Turns> lock(turn_);
  return starts_;
}

int64_t IsolatedReader::tensorRequests() const { return tensorRequests_.load(); }

void IsolatedReader::setReadPieceBytes(int64_t bytes) { pieceBytes_.store(bytes); }

void IsolatedReader::stop() {
  if (socket_ >= 0) {
    ::close(socket_);
    socket_ = -1;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

Status IsolatedReader::spawnAndOpen() {
  const std::string& exe = isolation_.executable;
  if (memory_ < 0) {
    memory_ = ::memfd_create("kvscope-reader", MFD_CLOEXEC);
    if (memory_ < 0) return Status::ioError(path_ + ": cannot create the reader's shared memory: " + std::strerror(errno));
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::ioError(path_ + ": cannot create the reader's socket: " + std::strerror(errno));
  const int childSocket = above(fds[1]);
  const int childMemory = ::fcntl(memory_, F_DUPFD_CLOEXEC, 16);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, childSocket, kSocketFd);
  posix_spawn_file_actions_adddup2(&actions, childMemory, kMemoryFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string arg0 = exe, arg1 = kReaderArgument;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t child = -1;
  const int rc = ::posix_spawn(&child, exe.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(childSocket);
  ::close(childMemory);
  if (rc != 0) {
    ::close(fds[0]);
    return Status::ioError(path_ + ": cannot start the reader " + exe + ": " + std::strerror(rc));
  }
  socket_ = fds[0];
  pid_ = child;
  ++starts_;
  auto reply = call(openRequest_, "", true);
  if (!reply) return reply.status();
  Parser in(reply->body);
  Status st = in.status();
  if (!st.isOk()) {
    stop();
    return st;
  }
  DumpInfo info = readInfo(in);
  if (!in.ok()) {
    stop();
    return Status::internal(path_ + ": the reader's reply to the open is malformed");
  }
  if (starts_ == 1) info_ = std::move(info);
  struct stat sb {};
  if (::fstat(memory_, &sb) != 0 || static_cast<size_t>(sb.st_size) < largestSlabBytes(info_)) {
    stop();
    return Status::internal(path_ + ": the reader's shared memory has the wrong size");
  }
  if (shared_ == nullptr) {
    sharedBytes_ = static_cast<size_t>(sb.st_size);
    void* p = ::mmap(nullptr, sharedBytes_, PROT_READ, MAP_SHARED, memory_, 0);
    if (p == MAP_FAILED) {
      stop();
      return Status::resourceLimit(path_ + ": cannot map the reader's shared memory: " + std::strerror(errno));
    }
    shared_ = p;
  }
  return Status::ok();
}

int IsolatedReader::readTimeoutMs() const {
  // A second more per 32 MiB of the largest slab, so that a legitimate read of a huge slab from
  // a slow disk is not mistaken for a hang.
  const int64_t ms = int64_t{isolation_.readTimeoutMs} + static_cast<int64_t>(largestSlabBytes(info_) >> 25) * 1000;
  return static_cast<int>(std::min<int64_t>(ms, int64_t{24} * 3600 * 1000));
}

Status IsolatedReader::ended(const std::string& what, bool isOpen) {
  int wstatus = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &wstatus, 0)) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  ::close(socket_);
  socket_ = -1;
  const std::string where = isOpen ? "while reading the file's metadata or token texts"
                                   : "while reading the data";
  if (r > 0 && WIFSIGNALED(wstatus))
    return Status::invalidData(path_ + ": " + what + "libhdf5 crashed (signal " +
                               std::to_string(WTERMSIG(wstatus)) + ") " + where +
                               "; the file is corrupt or hostile");
  if (r > 0 && WIFEXITED(wstatus) && isOpen && starts_ == 1)
    return Status::ioError(path_ + ": the reader " + isolation_.executable + " ended (exit code " +
                           std::to_string(WEXITSTATUS(wstatus)) + ") without opening the file; is it kvscope-cli?");
  return Status::ioError(path_ + ": " + what + "the reading process ended unexpectedly " + where);
}

Expected<IsolatedReader::Reply> IsolatedReader::call(const std::string& request, const std::string& what,
                                                     bool isOpen) {
  if (!isOpen && pid_ > 0) {
    // A reader that died while idle (killed, out of memory) is replaced before the request.
    pollfd pfd{socket_, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLIN))) stop();
  }
  if (!isOpen && pid_ <= 0) KVS_RETURN_IF_ERROR(spawnAndOpen());
  const std::string prefix = what.empty() ? std::string() : what + ": ";
  if (!sendFrame(socket_, request)) return ended(prefix, isOpen);
  const int timeout = isOpen ? isolation_.openTimeoutMs : readTimeoutMs();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
  uint64_t n = 0;
  Wait w = receiveBefore(socket_, reinterpret_cast<char*>(&n), sizeof n, deadline, isolation_.cancelled);
  Reply reply;
  if (w == Wait::Ready) {
    reply.body.resize(n);
    w = receiveBefore(socket_, reply.body.data(), n, deadline, isolation_.cancelled);
  }
  switch (w) {
    case Wait::Ready: return reply;
    case Wait::Closed: return ended(prefix, isOpen);
    case Wait::Cancelled: stop(); return Status::cancelled();
    case Wait::TimedOut: break;
  }
  stop();
  return Status::invalidData(path_ + ": " + prefix +
                             (isOpen ? "reading the file's metadata" : "reading") + " did not finish within " +
                             seconds(timeout) + " (libhdf5 loops on this file); it is corrupt or hostile");
}

std::string IsolatedReader::describe(int layer, TensorKind kind, int sequence) const {
  const char* name = tensorKindName(kind);
  std::string what = info_.canonical ? "/layers/" + std::to_string(layer) + "/" + name
                                     : std::string(name) + " of layer " + std::to_string(layer);
  return sequence > 0 ? what + " (sequence " + std::to_string(sequence) + ")" : what;
}

Expected<std::array<int64_t, 3>> IsolatedReader::readShared(
    int layer, TensorKind kind, int sequence,
    const std::function<float*(const std::array<int64_t, 3>&)>& target, bool headRange, int64_t firstHead,
    int64_t heads, bool wholePiece) {
  std::lock_guard<Turns> lock(turn_);
  tensorRequests_.fetch_add(1);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(headRange ? Op::ReadHeads : Op::Read)).put<int32_t>(layer);
  w.put<int32_t>(static_cast<int32_t>(kind)).put<int32_t>(sequence);
  // A range the dump refuses (an empty or negative count) goes too: the reader's Dump says why.
  if (headRange) w.put<int64_t>(firstHead).put<int64_t>(heads);
  std::string what = describe(layer, kind, sequence);
  // A piece of a whole-tensor read is named as the whole read the caller asked for.
  if (headRange && !wholePiece)
    what += ", heads [" + std::to_string(firstHead) + ", " + std::to_string(firstHead + heads) + ")";
  auto reply = call(w.data(), what, false);
  if (!reply) return reply.status();
  Parser in(reply->body);
  KVS_RETURN_IF_ERROR(in.status());
  std::array<int64_t, 3> shape{};
  for (auto& v : shape) v = in.get<int64_t>();
  const double bytes = double(shape[0]) * double(shape[1]) * double(shape[2]) * sizeof(float);
  if (!in.ok() || shape[0] < 0 || shape[1] < 0 || shape[2] < 0 || bytes > double(sharedBytes_))
    return Status::internal(path_ + ": " + describe(layer, kind, sequence) + ": the reader's reply is malformed");
  float* out = target(shape);
  if (out == nullptr) return bufferTooSmall(layer, kind, sequence);
  if (bytes > 0) std::memcpy(out, shared_, static_cast<size_t>(bytes));
  return shape;
}

std::optional<std::array<int64_t, 3>> IsolatedReader::expectedShape(int layer, TensorKind kind, int sequence) const {
  const DumpInfo& i = info_;
  if (layer < 0 || layer >= i.layers || sequence < 0 || sequence >= i.sequences) return std::nullopt;
  if ((kind == TensorKind::Query && !i.hasQuery) || (kind == TensorKind::KeyPreRope && !i.hasKeyPreRope))
    return std::nullopt;
  if (kind == TensorKind::Query) return std::array<int64_t, 3>{i.heads, i.queries, i.headDim};
  return std::array<int64_t, 3>{i.kvHeads, i.tokens, i.headDim};
}

Expected<std::array<int64_t, 3>> IsolatedReader::readWhole(
    int layer, TensorKind kind, int sequence, const std::function<float*(const std::array<int64_t, 3>&)>& target) {
  const auto shape = expectedShape(layer, kind, sequence);
  const int64_t headFloats = shape ? (*shape)[1] * (*shape)[2] : 0;
  const int64_t headBytes = headFloats * static_cast<int64_t>(sizeof(float));
  // Refusals, one-head tensors and tensors within one piece go whole, as one request: the
  // reader's own Dump answers them word for word.
  if (!shape || (*shape)[0] < 2 || headBytes == 0 || (*shape)[0] * headBytes <= pieceBytes_.load())
    return readShared(layer, kind, sequence, target);
  const int64_t heads = (*shape)[0];
  float* out = target(*shape);
  if (out == nullptr) return bufferTooSmall(layer, kind, sequence);
  const int64_t perPiece = std::clamp<int64_t>(pieceBytes_.load() / headBytes, 1, heads);
  for (int64_t first = 0; first < heads; first += perPiece) {
    const int64_t count = std::min(perPiece, heads - first);
    bool unexpected = false;
    auto got = readShared(
        layer, kind, sequence,
        [&](const std::array<int64_t, 3>& s) -> float* {
          unexpected = s != std::array<int64_t, 3>{count, (*shape)[1], (*shape)[2]};
          return unexpected ? nullptr : out + first * headFloats;
        },
        /*headRange=*/true, first, count, /*wholePiece=*/true);
    // The open's metadata did not describe this tensor's extents (it always does for a dump
    // that opened): read it whole rather than trust the pieces.
    if (unexpected) return readShared(layer, kind, sequence, target);
    if (!got) return got.status();
  }
  return *shape;
}

Status IsolatedReader::bufferTooSmall(int layer, TensorKind kind, int sequence) const {
  return Status::invalidArgument(path_ + ": " + describe(layer, kind, sequence) + ": the buffer is too small for layer " +
                                 std::to_string(layer));
}

Status IsolatedReader::outOfMemory(int layer, TensorKind kind, int sequence) const {
  return Status::resourceLimit(path_ + ": " + describe(layer, kind, sequence) + ": not enough memory to read layer " +
                               std::to_string(layer));
}

Expected<Tensor3> IsolatedReader::read(int layer, TensorKind kind, int sequence) {
  Tensor3 out;
  try {
    auto shape = readWhole(layer, kind, sequence, [&](const std::array<int64_t, 3>& s) {
      out = Tensor3(s[0], s[1], s[2]);
      return out.data.data();
    });
    if (!shape) return shape.status();
  } catch (const std::bad_alloc&) {
    return outOfMemory(layer, kind, sequence);
  }
  return out;
}

Expected<std::array<int64_t, 3>> IsolatedReader::readInto(int layer, TensorKind kind, int sequence,
                                                          float* out, int64_t capacity) {
  return readWhole(layer, kind, sequence, [&](const std::array<int64_t, 3>& s) -> float* {
    return s[0] * s[1] * s[2] > capacity ? nullptr : out;
  });
}

Expected<Tensor3> IsolatedReader::readHeads(int layer, TensorKind kind, int64_t firstHead, int64_t count,
                                             int sequence) {
  Tensor3 out;
  try {
    auto shape = readShared(
        layer, kind, sequence,
        [&](const std::array<int64_t, 3>& s) {
          out = Tensor3(s[0], s[1], s[2]);
          return out.data.data();
        },
        /*headRange=*/true, firstHead, count);
    if (!shape) return shape.status();
  } catch (const std::bad_alloc&) {
    return outOfMemory(layer, kind, sequence);
  }
  return out;
}

Expected<std::array<int64_t, 3>> IsolatedReader::readHeadsInto(int layer, TensorKind kind, int64_t firstHead,
                                                               int64_t count, int sequence, float* out,
                                                               int64_t capacity) {
  return readShared(
      layer, kind, sequence,
      [&](const std::array<int64_t, 3>& s) -> float* { return s[0] * s[1] * s[2] > capacity ? nullptr : out; },
      /*headRange=*/true, firstHead, count);
}

Expected<std::vector<int64_t>> IsolatedReader::tokens(int sequence) {
  std::lock_guard<Turns> lock(turn_);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::Tokens)).put<int32_t>(sequence);
  auto reply = call(w.data(), "/tokens", false);
  if (!reply) return reply.status();
  Parser in(reply->body);
  KVS_RETURN_IF_ERROR(in.status());
  const std::string raw = in.str();
  if (!in.ok() || raw.size() % sizeof(int64_t) != 0)
    return Status::internal(path_ + ": /tokens: the reader's reply is malformed");
  std::vector<int64_t> out(raw.size() / sizeof(int64_t));
  if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());  // an empty vector has no data()
  return out;
}

Expected<std::vector<std::string>> IsolatedReader::tokenText(int sequence) {
  std::lock_guard<Turns> lock(turn_);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::TokenText)).put<int32_t>(sequence);
  auto reply = call(w.data(), "/token_text", false);
  if (!reply) return reply.status();
  Parser in(reply->body);
  KVS_RETURN_IF_ERROR(in.status());
  const auto n = in.get<uint64_t>();
  std::vector<std::string> out;
  for (uint64_t i = 0; i < n && in.ok(); ++i) out.push_back(in.str());
  if (!in.ok()) return Status::internal(path_ + ": /token_text: the reader's reply is malformed");
  return out;
}

Expected<StoredData> IsolatedReader::storedData(int layer, TensorKind kind) {
  std::lock_guard<Turns> lock(turn_);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::Stored)).put<int32_t>(layer).put<int32_t>(static_cast<int32_t>(kind));
  auto reply = call(w.data(), describe(layer, kind, 0), false);
  if (!reply) return reply.status();
  Parser in(reply->body);
  KVS_RETURN_IF_ERROR(in.status());
  StoredData s;
  s.declaredBytes = in.get<int64_t>();
  s.storedBytes = in.get<int64_t>();
  s.chunks = in.get<int64_t>();
  s.storedChunks = in.get<int64_t>();
  s.everySequence = in.get<uint8_t>() != 0;
  s.listTruncated = in.get<uint8_t>() != 0;
  const std::string raw = in.str();
  if (!in.ok() || raw.size() % sizeof(int) != 0)
    return Status::internal(path_ + ": " + describe(layer, kind, 0) + ": the reader's reply is malformed");
  s.sequences.resize(raw.size() / sizeof(int));
  if (!raw.empty()) std::memcpy(s.sequences.data(), raw.data(), raw.size());  // an empty vector has no data()
  return s;
}

Expected<std::vector<float>> IsolatedReader::logits(int sequence) {
  std::lock_guard<Turns> lock(turn_);
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(Op::Logits)).put<int32_t>(sequence);
  auto reply = call(w.data(), "/logits", false);
  if (!reply) return reply.status();
  Parser in(reply->body);
  KVS_RETURN_IF_ERROR(in.status());
  const std::string raw = in.str();
  if (!in.ok() || raw.size() % sizeof(float) != 0)
    return Status::internal(path_ + ": /logits: the reader's reply is malformed");
  std::vector<float> out(raw.size() / sizeof(float));
  if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());  // an empty vector has no data()
  return out;
}

}  // namespace kvscope
