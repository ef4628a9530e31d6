// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/system.h"

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

}  // namespace kvscope
