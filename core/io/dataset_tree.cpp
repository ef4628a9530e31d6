// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/io/dataset_tree.h"

#include "core/io/h5.h"
#include "core/util/input_file.h"

namespace kvscope {

namespace {

std::string typeName(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return "float" + std::to_string(H5Tget_size(type) * 8);
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(H5Tget_size(type) * 8);
    case H5T_STRING: return "string";
    default: return "other";
  }
}

struct Visit {
  DatasetTree* tree;
  size_t maxEntries;
};

herr_t visitLink(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto* visit = static_cast<Visit*>(data);
  if (info->type != H5L_TYPE_HARD) return 0;
  h5::Id object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);
  if (!object || H5Iget_type(object.get()) != H5I_DATASET) return 0;
  if (visit->tree->datasets.size() >= visit->maxEntries) {
    visit->tree->truncated = true;
    return 1;  // stop iterating
  }
  DatasetEntry entry;
  entry.path = std::string("/") + name;
  h5::Id space = h5::spaceId(H5Dget_space(object.get()));
  if (space) {
    for (hsize_t d : h5::dims(space.get())) entry.shape.push_back(static_cast<int64_t>(d));
  }
  h5::Id type = h5::typeId(H5Dget_type(object.get()));
  entry.dtype = type ? typeName(type.get()) : "other";
  visit->tree->datasets.push_back(std::move(entry));
  return 0;
}

}  // namespace

Expected<DatasetTree> listDatasets(const std::string& path, size_t maxEntries) {
  KVS_RETURN_IF_ERROR(checkRegularFile(path));  // a FIFO would block HDF5's open forever
  h5::Lock lock;
  h5::Id file = h5::fileId(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) {
    const std::string detail = h5::lastErrorText();
    return Status::ioError(path + ": cannot open as HDF5" + (detail.empty() ? "" : " (" + detail + ")"));
  }
  DatasetTree tree;
  tree.canonical = H5Aexists(file.get(), "kvdump_version") > 0;
  Visit visit{&tree, maxEntries};
  if (H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_NATIVE, visitLink, &visit) < 0) {
    return Status::ioError(path + ": cannot list datasets (" + h5::lastErrorText() + ")");
  }
  return tree;
}

}  // namespace kvscope
