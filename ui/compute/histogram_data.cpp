// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/compute/histogram_data.h"

namespace kvscope::ui {

HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head,
                               HistogramScope scope, int64_t index, int bins) {
  HistogramData out;
  HistogramWorkspace workspace;
  computeHistogramInto(x, head, xHat && xHat->sameShape(x) ? xHat : nullptr, head, scope, index, bins,
                       workspace, out);
  return out;
}

}  // namespace kvscope::ui
