"""What the benchmark scripts share to read rounds (``scripts/benchlib.py``): an engine's modes (bm25s
alternates between two speeds round by round) and the ratio of two engines taken round by round."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from benchlib import matched_ratios, modes  # noqa: E402

#: bench-search.json's rounds before issue 61: openqa steady, bm25s alternating between 1.4 and 2.5 s.
OPENQA = [0.4887, 0.454, 0.5203, 0.4572, 0.5539, 0.3621, 0.4898]
BM25S = [1.4214, 2.5315, 1.3879, 2.5152, 1.398, 2.5086, 1.8637]


def test_two_speeds_are_two_modes_and_one_odd_round_is_not():
    assert modes(BM25S) == [[0, 2, 4, 6], [1, 3, 5]]  # fast rounds first
    assert modes(OPENQA) == [list(range(7))]  # its fastest round stands alone: an outlier, not a mode
    assert modes([1.0, 1.1, 1.05]) == [[0, 1, 2]] and modes([1.0, 2.0, 1.0, 2.0]) == [[0, 2], [1, 3]]
    assert modes([1.0]) == [[0]] and modes([]) == [[]]


def test_the_ratio_is_taken_round_by_round():
    ratios = matched_ratios(OPENQA, BM25S)
    assert ratios[:2] == [2.909, 5.576] and len(ratios) == 7
    fast = sorted(ratios[i] for i in modes(BM25S)[0])
    assert fast == [2.524, 2.667, 2.909, 3.805]  # against bm25s's fast rounds, the figure held to the target
