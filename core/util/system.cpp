// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/system.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace kvscope {

int64_t memAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

int64_t availableMemoryBytes() {
  int64_t available = memAvailableBytes();
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    // VmSize: the address space this process already uses (first field of statm, in pages).
    std::ifstream statm("/proc/self/statm");
    int64_t pages = 0;
    statm >> pages;
    const int64_t used = pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
    const int64_t left = std::max<int64_t>(0, static_cast<int64_t>(limit.rlim_cur) - used);
    available = available > 0 ? std::min(available, left) : left;
  }
  return available;
}

}  // namespace kvscope
