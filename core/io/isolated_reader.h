// SPDX-License-Identifier: GPL-3.0-or-later
// One crash-isolated reader per open dump. libhdf5 1.10 can crash or loop on a crafted file, in
// an open or in a data read; kvscope cannot validate below it. So a dump opened with
// OpenOptions::isolation is parsed by a child process (kvscope-cli started in its reader mode),
// started once when the dump is opened and serving every read of it: requests and small replies
// go over a socket, tensors through shared memory. A crash or a hang there is an error naming
// the file (and dataset) for the read that met it; the next read starts a fresh reader.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// argv[1] that turns kvscope-cli into a reader (an internal mode, not a command).
inline constexpr const char* kReaderArgument = "--serve-dump-reader";

/// The reader's side: answers requests on file descriptor 3 with the shared memory on 4 until the
/// socket closes or the parent is gone. Returns the exit code; main() calls it before anything
/// else when argv[1] is kReaderArgument.
int serveDumpReader();

/// Isolation through `executable`, unless it is empty or KVSCOPE_ISOLATE_READS=0 (then empty:
/// in-process). KVSCOPE_PROBE_TIMEOUT_MS sets both time limits (default 30 s).
IsolationOptions isolationFromEnvironment(const std::string& executable);

/// A whole-tensor read larger than this is served as head ranges of at most this many bytes (at
/// least one head), each its own turn: a read from another thread then waits for one piece, not
/// for a whole 128 MiB tensor. 16 MiB is one kv head of KVH 8, T 32768, D 128.
/// KVSCOPE_READ_PIECE_MIB=N in the environment sets N MiB; =0 one request per tensor.
inline constexpr int64_t kReadPieceBytes = int64_t{16} << 20;

/// The client of one reader process. Dump::open starts it for OpenOptions::isolation and forwards
/// every call; thread-safe: calls take turns in the order they came (libhdf5 would serialize
/// them anyway), and a large whole-tensor read takes one turn per piece (kReadPieceBytes), so a
/// layer read from the GUI waits for at most one piece of a background lane's read.
class IsolatedReader {
 public:
  /// Starts a reader and opens `path` there. Errors: the open's own, or the crash or timeout.
  static Expected<std::shared_ptr<IsolatedReader>> start(const std::string& path,
                                                         const OpenOptions& options);
  ~IsolatedReader();
  IsolatedReader(const IsolatedReader&) = delete;
  IsolatedReader& operator=(const IsolatedReader&) = delete;

  /// The dump's metadata, as the reader's open found it.
  [[nodiscard]] const DumpInfo& info() const { return info_; }
  /// Dump::read in the reader.
  Expected<Tensor3> read(int layer, TensorKind kind, int sequence);
  /// Dump::readInto in the reader, copied into `out` (room for `capacity` floats).
  Expected<std::array<int64_t, 3>> readInto(int layer, TensorKind kind, int sequence, float* out,
                                            int64_t capacity);
  /// Dump::readHeads in the reader (a head range of one tensor).
  Expected<Tensor3> readHeads(int layer, TensorKind kind, int64_t firstHead, int64_t count, int sequence);
  /// Dump::readHeadsInto in the reader, copied into `out` (room for `capacity` floats).
  Expected<std::array<int64_t, 3>> readHeadsInto(int layer, TensorKind kind, int64_t firstHead, int64_t count,
                                                 int sequence, float* out, int64_t capacity);
  /// Dump::tokens in the reader.
  Expected<std::vector<int64_t>> tokens(int sequence);
  /// Dump::tokenText in the reader.
  Expected<std::vector<std::string>> tokenText(int sequence);
  /// Dump::storedData in the reader.
  Expected<StoredData> storedData(int layer, TensorKind kind);
  /// Dump::logits in the reader.
  Expected<std::vector<float>> logits(int sequence);

  /// The process serving now, -1 when none is running (the next call starts one).
  [[nodiscard]] pid_t pid() const;
  /// How many reader processes were started so far (the first one included).
  [[nodiscard]] int starts() const;
  /// How many tensor reads were sent to the reader so far (a pieced whole read counts each piece).
  [[nodiscard]] int64_t tensorRequests() const;
  /// The piece size of whole-tensor reads (kReadPieceBytes unless a test sets another).
  void setReadPieceBytes(int64_t bytes);

 private:
  IsolatedReader() = default;
  struct Reply;
  Status spawnAndOpen();
  Expected<Reply> call(const std::string& request, const std::string& what, bool isOpen);
  /// One read through the shared memory: the whole tensor, or (headRange) heads [firstHead,
  /// firstHead + heads), named as the whole tensor when it is a piece of a whole read.
  Expected<std::array<int64_t, 3>> readShared(int layer, TensorKind kind, int sequence,
                                              const std::function<float*(const std::array<int64_t, 3>&)>& target,
                                              bool headRange = false, int64_t firstHead = 0, int64_t heads = 0,
                                              bool wholePiece = false);
  /// The error of a caller's buffer too small for a read's result.
  [[nodiscard]] Status bufferTooSmall(int layer, TensorKind kind, int sequence) const;
  /// The error of an allocation that failed for a read's result.
  [[nodiscard]] Status outOfMemory(int layer, TensorKind kind, int sequence) const;
  /// A whole-tensor read: one request, or pieces of heads when the tensor exceeds the piece size.
  Expected<std::array<int64_t, 3>> readWhole(int layer, TensorKind kind, int sequence,
                                             const std::function<float*(const std::array<int64_t, 3>&)>& target);
  /// [heads, tokens, dim] of a tensor the dump has, from the open's metadata; nullopt otherwise.
  [[nodiscard]] std::optional<std::array<int64_t, 3>> expectedShape(int layer, TensorKind kind, int sequence) const;
  Status ended(const std::string& what, bool isOpen);
  void stop();
  [[nodiscard]] std::string describe(int layer, TensorKind kind, int sequence) const;
  [[nodiscard]] int readTimeoutMs() const;

  /// A mutex that serves waiters first come, first served (std::mutex may let one thread that
  /// reads in a loop take it again and again).
  class Turns {
   public:
    void lock() {
      std::unique_lock<std::mutex> l(m_);
      const uint64_t ticket = next_++;
      cv_.wait(l, [&] { return serving_ == ticket; });
    }
    void unlock() {
      {
        std::lock_guard<std::mutex> l(m_);
        ++serving_;
      }
      cv_.notify_all();
    }

   private:
    std::mutex m_;
    std::condition_variable cv_;
    uint64_t next_ = 0, serving_ = 0;
  };

  std::string path_;
  std::string openRequest_;
  IsolationOptions isolation_;
  DumpInfo info_;
  mutable Turns turn_;
  pid_t pid_ = -1;
  int socket_ = -1;
  int memory_ = -1;       ///< the memfd the reader writes tensors into, kept across restarts
  void* shared_ = nullptr;
  size_t sharedBytes_ = 0;
  int starts_ = 0;
  std::atomic<int64_t> tensorRequests_{0};
  std::atomic<int64_t> pieceBytes_{kReadPieceBytes};
};

}  // namespace kvscope
