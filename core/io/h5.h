// SPDX-License-Identifier: GPL-3.0-or-later
// A small RAII layer over the HDF5 C API. Debian's libhdf5 is built without thread safety, so
// every HDF5 call in kvscope runs under one global mutex (h5::Lock), and HDF5's own error
// printing is switched off: errors reach the user as Status messages, never as "HDF5-DIAG".
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kvscope::h5 {

/// Holds the global HDF5 mutex (recursive) and makes sure HDF5's error printing is off.
class Lock {
 public:
  Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> lock_;
};

/// Switches off HDF5's automatic error printing (idempotent; Lock calls it).
void silenceErrors();

/// The innermost message on HDF5's error stack as one line, or "" (for appending to our own
/// messages); a failed system call underneath is reported as its OS error ("File too large").
std::string lastErrorText();

/// The errno in an HDF5 file-driver description ("…, errno = 28, …"), or 0.
int osErrnoIn(const std::string& description);

/// The first line of `description`, without trailing separators.
std::string oneLine(const std::string& description);

/// An owned HDF5 identifier; closes it (under the lock) on destruction.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;

  [[nodiscard]] hid_t get() const { return id_; }
  [[nodiscard]] bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }
  /// Closes now; returns false when HDF5 reported an error while closing.
  bool reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

/// Typed wrappers: the closer is the only difference.
inline Id fileId(hid_t id) { return {id, H5Fclose}; }
inline Id groupId(hid_t id) { return {id, H5Gclose}; }
inline Id datasetId(hid_t id) { return {id, H5Dclose}; }
inline Id spaceId(hid_t id) { return {id, H5Sclose}; }
inline Id typeId(hid_t id) { return {id, H5Tclose}; }
inline Id attrId(hid_t id) { return {id, H5Aclose}; }
inline Id plistId(hid_t id) { return {id, H5Pclose}; }

/// Dimensions of a dataspace (empty for scalars, or on error).
std::vector<hsize_t> dims(hid_t space);

/// True when `path` (absolute, "/a/b/c") names a link that exists, checking each component.
bool exists(hid_t file, const std::string& path);

/// The first component of `path` that is an external link, or "" when none is.
std::string externalLinkOn(hid_t file, const std::string& path);

/// IEEE half precision as a file type (little endian), built from float32 since HDF5 1.10 has
/// no predefined half type.
Id halfType(H5T_order_t order = H5T_ORDER_LE);

/// True when `type` is an IEEE binary16 layout (either byte order).
bool isIeeeHalf(hid_t type);

/// Creates a dataset's or attribute's string type: variable-length UTF-8.
Id utf8StringType();

}  // namespace kvscope::h5
