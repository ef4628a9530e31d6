// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/vocabulary.h"

namespace kvscope {

const char* tensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::Key:
      return "key";
    case TensorKind::Value:
      return "value";
    case TensorKind::Query:
      return "query";
    case TensorKind::KeyPreRope:
      return "key_pre_rope";
  }
  return "?";
}

const char* ropeStyleName(RopeStyle style) {
  return style == RopeStyle::Interleaved ? "interleaved" : "half";
}

}  // namespace kvscope
