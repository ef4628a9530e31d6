// SPDX-License-Identifier: GPL-3.0-or-later
// Keeps kvscope_ui non-empty until the GUI lands.
namespace kvscope::ui {
int placeholder() { return 0; }
}  // namespace kvscope::ui
