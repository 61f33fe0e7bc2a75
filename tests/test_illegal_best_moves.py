"""tools/lab/probes/illegal_best_moves.py: why a B: move is illegal, judged by python-chess."""
import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "lab" / "probes" / "illegal_best_moves.py"
spec = importlib.util.spec_from_file_location("illegal_best_moves", TOOL)
illegal_best_moves = importlib.util.module_from_spec(spec)
spec.loader.exec_module(illegal_best_moves)

PINNED = "4k3/4r3/8/8/8/8/4B3/4K3 w - - 0 1"        # the white bishop on e2 is pinned by the rook on e7
IN_CHECK = "4k3/8/8/8/8/8/3PPP2/r3K3 w - - 0 1"     # the rook on a1 checks the white king


@pytest.mark.parametrize("fen, move, kind", [
    (PINNED, "e1d1", "legal"),
    (PINNED, "e2d3", "leaves king in check"),           # the pinned bishop steps off the e-file
    (IN_CHECK, "d2d3", "leaves king in check"),          # a pawn move that ignores the check
    (PINNED, "e1e2", "moves wrongly: king"),             # onto its own bishop
    (PINNED, "e2e4", "moves wrongly: bishop"),           # not a bishop's line
    (PINNED, "e7e6", "no own piece"),                    # the opponent's rook
    (PINNED, "d4d5", "no own piece"),                    # an empty square
    (PINNED, None, "unparsable"),
    (PINNED, "e2", "unparsable"),
])
def test_each_illegal_move_is_named_by_what_forbids_it(fen: str, move: str | None, kind: str) -> None:
    assert illegal_best_moves.illegal_kind(fen, move) == kind
