// SPDX-License-Identifier: GPL-3.0-or-later
// Human-written sizes and rates: "80GiB", "16GB", "4.8TB/s", "60Tops/s".
#pragma once

#include <string>
#include <string_view>

#include "core/util/status.h"

namespace kvscope {

/// Bytes from "80GiB", "16GB", "512MiB", "1e9", "4096B": decimal prefixes k M G T P (×1000),
/// binary Ki Mi Gi Ti Pi (×1024); the unit `B` is optional. Errors quote the text and `what`.
Expected<double> parseByteSize(std::string_view text, std::string_view what = "size");
/// Bytes per second from "4.8TB/s", "900GB/s", "1.5TiB/s" (the `/s` is required).
Expected<double> parseBandwidth(std::string_view text, std::string_view what = "bandwidth");
/// Operations per second from "60Tops/s", "989TFLOPS", "2.5e14ops/s" (decimal prefixes only).
Expected<double> parseOpRate(std::string_view text, std::string_view what = "op rate");

/// "80 GiB", "4.80 TB/s"-style rendering for reports (binary for sizes, decimal for rates).
std::string formatBytes(double bytes);
/// Decimal rendering with a unit, e.g. formatRate(4.8e12, "B/s") = "4.80 TB/s".
std::string formatRate(double perSecond, std::string_view unit);

}  // namespace kvscope
