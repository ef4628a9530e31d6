// SPDX-License-Identifier: GPL-3.0-or-later
// Builds HDF5 files with the C API directly, independent of kvscope's writer, so reader tests
// can produce every valid and malformed layout they need.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::test {

/// An HDF5 file being built; closed on destruction.
class H5Builder {
 public:
  explicit H5Builder(const std::string& path);
  ~H5Builder();
  H5Builder(const H5Builder&) = delete;
  H5Builder& operator=(const H5Builder&) = delete;

  [[nodiscard]] hid_t file() const { return file_; }
  void close();

  void intAttr(const std::string& name, int64_t value, const std::string& object = "/");
  void doubleAttr(const std::string& name, double value, const std::string& object = "/");
  void stringAttr(const std::string& name, const std::string& value,
                  const std::string& object = "/");
  /// Creates a group (and missing parents).
  void group(const std::string& path);
  /// A float dataset of `fileType` holding `values` (row-major); missing parents are created.
  /// `chunk` non-empty makes it chunked; `dcpl` (if >= 0) replaces the creation properties.
  void floats(const std::string& path, const std::vector<hsize_t>& dims,
              const std::vector<double>& values, hid_t fileType = H5T_IEEE_F32LE, hid_t dcpl = -1);
  /// An int64 dataset.
  void ints(const std::string& path, const std::vector<hsize_t>& dims,
            const std::vector<int64_t>& values, hid_t fileType = H5T_STD_I64LE);
  /// A variable-length UTF-8 string dataset.
  void strings(const std::string& path, const std::vector<hsize_t>& dims,
               const std::vector<std::string>& values);

 private:
  hid_t file_ = -1;
};

/// The value the canonical test files hold at (layer, tensor kind index, sequence, head, token,
/// channel): a multiple of 1/4 in [-8, 8), exactly representable in every float type.
double patternValue(int layer, int kind, int sequence, int64_t head, int64_t token,
                    int64_t channel);

/// Shape of a canonical test dump.
struct CanonicalShape {
  int layers = 2, kvHeads = 2, heads = 4, tokens = 5, queries = 3, headDim = 4, sequences = 1;
  bool batchAxis = false;
  bool query = true, keyPreRope = true;
};

/// Writes a canonical dump of `patternValue`s with element type `fileType` for every tensor.
void writeCanonical(const std::string& path, const CanonicalShape& shape,
                    hid_t fileType = H5T_IEEE_F32LE);

/// IEEE half as a file type of the given byte order, built from the C API (independent of h5.h).
hid_t makeHalfType(H5T_order_t order);

}  // namespace kvscope::test
