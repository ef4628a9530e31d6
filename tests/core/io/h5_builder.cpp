// SPDX-License-Identifier: GPL-3.0-or-later
#include "tests/core/io/h5_builder.h"

#include <stdexcept>

namespace kvscope::test {

namespace {

hid_t intermediateLcpl() {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error("test file builder: " + what);
}

hid_t openObject(hid_t file, const std::string& object) {
  return H5Oopen(file, object.c_str(), H5P_DEFAULT);
}

}  // namespace

H5Builder::H5Builder(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  check(file_ < 0 ? -1 : 0, "create " + path);
}

H5Builder::~H5Builder() { close(); }

void H5Builder::close() {
  if (file_ >= 0) H5Fclose(file_);
  file_ = -1;
}

void H5Builder::intAttr(const std::string& name, int64_t value, const std::string& object) {
  hid_t obj = openObject(file_, object);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  check(H5Awrite(attr, H5T_NATIVE_INT64, &value), "attribute " + name);
  H5Aclose(attr);
  H5Sclose(space);
  H5Oclose(obj);
}

void H5Builder::doubleAttr(const std::string& name, double value, const std::string& object) {
  hid_t obj = openObject(file_, object);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  check(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), "attribute " + name);
  H5Aclose(attr);
  H5Sclose(space);
  H5Oclose(obj);
}

void H5Builder::stringAttr(const std::string& name, const std::string& value,
                           const std::string& object) {
  hid_t obj = openObject(file_, object);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = value.c_str();
  check(H5Awrite(attr, type, &p), "attribute " + name);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Oclose(obj);
}

void H5Builder::group(const std::string& path) {
  hid_t lcpl = intermediateLcpl();
  hid_t g = H5Gcreate2(file_, path.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT);
  check(g < 0 ? -1 : 0, "group " + path);
  H5Gclose(g);
  H5Pclose(lcpl);
}

void H5Builder::floats(const std::string& path, const std::vector<hsize_t>& dims,
                       const std::vector<double>& values, hid_t fileType, hid_t dcpl) {
  hid_t lcpl = intermediateLcpl();
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t ds = H5Dcreate2(file_, path.c_str(), fileType, space, lcpl, dcpl >= 0 ? dcpl : H5P_DEFAULT,
                        H5P_DEFAULT);
  check(ds < 0 ? -1 : 0, "dataset " + path);
  if (!values.empty())
    check(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
          "write " + path);
  H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(lcpl);
}

void H5Builder::ints(const std::string& path, const std::vector<hsize_t>& dims,
                     const std::vector<int64_t>& values, hid_t fileType) {
  hid_t lcpl = intermediateLcpl();
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t ds = H5Dcreate2(file_, path.c_str(), fileType, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  check(ds < 0 ? -1 : 0, "dataset " + path);
  if (!values.empty())
    check(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
          "write " + path);
  H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(lcpl);
}

void H5Builder::strings(const std::string& path, const std::vector<hsize_t>& dims,
                        const std::vector<std::string>& values) {
  hid_t lcpl = intermediateLcpl();
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t ds = H5Dcreate2(file_, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  check(ds < 0 ? -1 : 0, "dataset " + path);
  std::vector<const char*> ptrs;
  for (const auto& s : values) ptrs.push_back(s.c_str());
  check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "write " + path);
  H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(type);
  H5Pclose(lcpl);
}

double patternValue(int layer, int kind, int sequence, int64_t head, int64_t token,
                    int64_t channel) {
  const int64_t k = (layer * 7 + kind * 3 + sequence * 5 + head * 11 + token * 13 + channel) % 64;
  return (static_cast<double>(k) - 32.0) / 4.0;
}

void writeCanonical(const std::string& path, const CanonicalShape& s, hid_t fileType) {
  H5Builder b(path);
  b.intAttr("kvdump_version", 1);
  b.stringAttr("model", "test-model");
  const bool batched = s.batchAxis || s.sequences > 1;
  for (int l = 0; l < s.layers; ++l) {
    for (int kind = 0; kind < 4; ++kind) {
      if (kind == 2 && !s.query) continue;
      if (kind == 3 && !s.keyPreRope) continue;
      const int64_t h = kind == 2 ? s.heads : s.kvHeads, t = kind == 2 ? s.queries : s.tokens;
      std::vector<hsize_t> dims;
      if (batched) dims.push_back(static_cast<hsize_t>(s.sequences));
      dims.insert(dims.end(), {static_cast<hsize_t>(h), static_cast<hsize_t>(t),
                               static_cast<hsize_t>(s.headDim)});
      std::vector<double> v;
      for (int q = 0; q < s.sequences; ++q)
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t tt = 0; tt < t; ++tt)
            for (int64_t d = 0; d < s.headDim; ++d)
              v.push_back(patternValue(l, kind, q, hh, tt, d));
      static const char* const names[] = {"key", "value", "query", "key_pre_rope"};
      b.floats("/layers/" + std::to_string(l) + "/" + names[kind], dims, v, fileType);
    }
  }
}

hid_t makeHalfType(H5T_order_t order) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  H5Tset_order(t, order);
  return t;
}

}  // namespace kvscope::test
