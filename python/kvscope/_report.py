# SPDX-License-Identifier: GPL-3.0-or-later
"""Report: eval's JSON as a dict, with a tidy pandas view."""

TIDY_COLUMNS = ["layer", "kv_head", "side", "metric", "value"]
SIDES = ("key", "value")
CASES = ("key_only", "value_only", "joint")


class Result(dict):
    """What a command's --json prints, as a dict.

    setting_notes: what a preset or engine string resolved to and why (the CLI prints these to
    standard error as "note: …"); empty otherwise.
    """

    setting_notes = ()


class Report(Result):
    """The report `kvscope-cli eval --json` prints (docs/report.md), as a dict, with to_frame()."""

    def rows(self):
        """(layer, kv_head, side, metric, value) for every number of every evaluated head: side is
        key or value (tensor metrics) or key_only, value_only, joint (attention cases); null
        values are None."""
        for layer in self["layers"]:
            for head in layer["heads"]:
                for side in SIDES:
                    for metric, v in head[side].items():
                        yield layer["layer"], head["kv_head"], side, metric, v
                attention = head.get("attention")
                if attention:
                    for case in CASES:
                        for metric, v in attention[case].items():
                            yield layer["layer"], head["kv_head"], case, metric, v

    def to_frame(self):
        """A tidy pandas DataFrame: one row per layer × kv head × side × metric (columns layer,
        kv_head, side, metric, value; null values are NaN). Needs pandas."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - reported to the user as is
            raise ImportError("Report.to_frame needs pandas (Debian: python3-pandas)") from exc
        frame = pd.DataFrame(list(self.rows()), columns=TIDY_COLUMNS)
        frame["value"] = frame["value"].astype(float)
        return frame
