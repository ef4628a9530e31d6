// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/io/h5.h"

#include <cstdlib>
#include <cstring>

namespace kvscope::h5 {

namespace {

std::recursive_mutex& globalMutex() {
  static std::recursive_mutex m;
  return m;
}

struct ErrorWalk {
  std::string innermost;
  int osErrno = 0;
};

herr_t collectError(unsigned n, const H5E_error2_t* err, void* data) {
  auto& walk = *static_cast<ErrorWalk*>(data);
  if (err == nullptr || err->desc == nullptr) return 0;
  // The stack is walked from the innermost error outward; the first is the most specific.
  if (n == 0) walk.innermost = err->desc;
  // The file drivers describe a failed system call as "…, errno = 28, error message = '…', …"
  // over several lines with buffer addresses; the OS error is all a user needs from that.
  if (walk.osErrno == 0) walk.osErrno = osErrnoIn(err->desc);
  return 0;
}

}  // namespace

void silenceErrors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // After a failed H5Fclose (disk full), HDF 1.10's exit-time clean-up closes the broken file
    // again and crashes (SIGSEGV in H5F__close_cb): skip it; kvscope closes its files itself.
    H5dont_atexit();
  });
  // A thread-safe libhdf5 (Debian's is) keeps one error stack, and its automatic printing, per
  // thread: every thread that calls the library turns the "HDF5-DIAG" print-out off for itself.
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

Lock::Lock() : lock_(globalMutex()) { silenceErrors(); }

int osErrnoIn(const std::string& description) {
  const std::string tag = "errno = ";
  const size_t at = description.find(tag);
  if (at == std::string::npos) return 0;
  const char* digits = description.c_str() + at + tag.size();
  char* end = nullptr;
  const long value = std::strtol(digits, &end, 10);
  return end != digits && value > 0 && value < 4096 ? static_cast<int>(value) : 0;
}

std::string oneLine(const std::string& description) {
  std::string line = description.substr(0, description.find_first_of("\r\n"));
  while (!line.empty() && (line.back() == ' ' || line.back() == ',' || line.back() == ':'))
    line.pop_back();
  return line;
}

std::string lastErrorText() {
  Lock lock;
  ErrorWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collectError, &walk);
  if (walk.osErrno != 0) return std::strerror(walk.osErrno);
  return oneLine(walk.innermost);
}

bool Id::reset() {
  bool ok = true;
  if (id_ >= 0 && closer_ != nullptr) {
    Lock lock;
    ok = closer_(id_) >= 0;
  }
  id_ = H5I_INVALID_HID;
  return ok;
}

std::vector<hsize_t> dims(hid_t space) {
  Lock lock;
  int rank = H5Sget_simple_extent_ndims(space);
  if (rank <= 0) return {};
  std::vector<hsize_t> d(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space, d.data(), nullptr) < 0) return {};
  return d;
}

namespace {

// Calls `visit` with the prefixes "/a", "/a/b", "/a/b/c" of "/a/b/c" in turn, while it returns
// true: one prefix at a time, so a path of n bytes costs O(n) memory (a list of every prefix
// would be quadratic: 2.7 GB for a 100 KB mapping path).
template <typename Visit>
bool eachPrefix(const std::string& path, Visit visit) {
  size_t pos = 0;
  std::string prefix;
  while (pos < path.size()) {
    const size_t next = path.find('/', pos + 1);
    prefix.assign(path, 0, next);
    if (!prefix.empty() && prefix != "/" && prefix.back() != '/' && !visit(prefix)) return false;
    if (next == std::string::npos) break;
    pos = next;
  }
  return true;
}

}  // namespace

bool exists(hid_t file, const std::string& path) {
  Lock lock;
  // A dangling soft or external link "exists" as a link but has no object.
  return eachPrefix(path, [&](const std::string& p) {
           return H5Lexists(file, p.c_str(), H5P_DEFAULT) > 0 && H5Oexists_by_name(file, p.c_str(), H5P_DEFAULT) > 0;
         }) &&
         !path.empty();
}

std::string externalLinkOn(hid_t file, const std::string& path) {
  Lock lock;
  std::string found;
  eachPrefix(path, [&](const std::string& p) {
    if (H5Lexists(file, p.c_str(), H5P_DEFAULT) <= 0) return false;
    H5L_info_t info{};
    if (H5Lget_info(file, p.c_str(), &info, H5P_DEFAULT) < 0) return false;
    if (info.type == H5L_TYPE_EXTERNAL) {
      found = p;
      return false;
    }
    return true;
  });
  return found;
}

Id halfType(H5T_order_t order) {
  Lock lock;
  Id t = typeId(H5Tcopy(H5T_IEEE_F32LE));
  // Order matters: shrink the fields before the size, as HDF5 requires.
  H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
  H5Tset_size(t.get(), 2);
  H5Tset_ebias(t.get(), 15);
  H5Tset_order(t.get(), order);
  return t;
}

bool isIeeeHalf(hid_t type) {
  Lock lock;
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2) return false;
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 &&
         H5Tget_ebias(type) == 15 && H5Tget_norm(type) == H5T_NORM_IMPLIED &&
         H5Tget_offset(type) == 0 && H5Tget_precision(type) == 16;
}

Id utf8StringType() {
  Lock lock;
  Id t = typeId(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

}  // namespace kvscope::h5
