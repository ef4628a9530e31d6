// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/dump_workloads.h"

#include <sys/statvfs.h>

namespace kvscope::bench {

int64_t freeDiskBytes(const std::string& dir) {
  struct statvfs fs{};
  if (statvfs(dir.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

Expected<EvalFigures> benchEval(const DumpShape&, const std::string&, const std::string&,
                                const Progress&) {
  return Status::unsupported("waiting for core/synth (writeSynthDump) and core/report (evaluate)");
}

Expected<OpenFigures> benchOpen(const DumpShape&, const std::string&, const Progress&) {
  return Status::unsupported("waiting for core/synth (writeSynthDump)");
}

}  // namespace kvscope::bench
