// SPDX-License-Identifier: GPL-3.0-or-later
// A dump that opens cleanly but crashes libhdf5 1.10.8 inside H5Dread, for the tests of the
// crash-isolated reads (CLI and GUI).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kvscope::test {

/// Writes `path`: a canonical one-layer dump whose `key` is chunked with the Fletcher-32 filter,
/// then patches the first chunk's size in the chunk index (a version-1 B-tree node) to 2 bytes.
/// libhdf5 subtracts the 4-byte checksum from 2 (unsigned) and checksums memory until it faults:
/// SIGSEGV inside H5Dread, long after a successful open. Returns false when no node was found.
inline bool writeChunkIndexCrasher(const std::string& path) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return false;
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "kvdump_version", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const int64_t version = 1;
  H5Awrite(a, H5T_NATIVE_INT64, &version);
  H5Aclose(a);
  H5Sclose(scalar);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hsize_t dims[3] = {4, 8, 8}, chunk[3] = {1, 8, 8};
  std::vector<float> data(4 * 8 * 8);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 17) * 0.25f;
  for (const char* name : {"/layers/0/key", "/layers/0/value"}) {
    hid_t space = H5Screate_simple(3, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (std::string(name) == "/layers/0/key") {
      H5Pset_chunk(dcpl, 3, chunk);
      H5Pset_fletcher32(dcpl);
    }
    hid_t ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  H5Pclose(lcpl);
  H5Fclose(f);
  // Version-1 B-tree node: "TREE", type (1 = chunked raw data), level, entries used (2 bytes),
  // left and right sibling addresses (8 bytes each), then key 0 starting with the chunk size.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  size_t node = 0;
  while ((node = bytes.find("TREE", node)) != std::string::npos && bytes[node + 4] != 1) node += 4;
  if (node == std::string::npos || node + 28 > bytes.size()) return false;
  bytes[node + 24] = 2;
  bytes[node + 25] = bytes[node + 26] = bytes[node + 27] = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace kvscope::test
