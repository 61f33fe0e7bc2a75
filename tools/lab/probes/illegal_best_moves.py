"""Where a model's B: move is illegal: the first held-out P: positions, greedy, by whether the side to
move is in check and by what makes the move illegal.

    python3 tools/lab/probes/illegal_best_moves.py --positions 1024 model.path=MODEL_FOLDER data=selfplay device=cpu

OVERRIDEs compose over experiment=grpo_rookworld_tiny (its token caps and evaluation settings). The
positions are the evaluation's own (eval.split, default validation; eval.split=test for the test part).
Prints the illegal share in and out of check, then the illegal moves by kind:
  unparsable          no single B: move
  no own piece        the from-square is empty or holds the opponent's piece
  leaves king in check  a pseudo-legal move (the piece moves that way) that the king's safety forbids
  moves wrongly       the piece cannot move that way (by its type: geometry queen, ...)
and a few examples (FEN, move, kind).
"""
import argparse
from collections import Counter

import chess
import torch

from rookworld.run.build import heldout_problems, load_policy
from rookworld.app.config import compose, load_run
from rookworld.model.fast_sampling import make_decoder
from rookworld.judge.rollout import decode_completions, generate_for_problems
from rookworld.specs.rules import resolve_device
from rookworld.tasks.policy import legal_moves, parse_policy

BATCH = 64
EXAMPLES = 12


def illegal_kind(fen: str, move_text: str | None) -> str:
    """Why `move_text` is not a legal move of `fen` (a legal move: "legal")."""
    if move_text is None:
        return "unparsable"
    if move_text in legal_moves(fen):
        return "legal"
    board = chess.Board(fen)
    try:
        move = chess.Move.from_uci(move_text)
    except ValueError:
        return "unparsable"
    piece = board.piece_at(move.from_square)
    if piece is None or piece.color != board.turn:
        return "no own piece"
    if move in board.pseudo_legal_moves:
        return "leaves king in check"
    return f"moves wrongly: {chess.piece_name(piece.piece_type)}"


def greedy_best_moves(overrides: list[str], positions: int) -> list[tuple[str, str | None]]:
    """(FEN, the B: move or None) of the first `positions` held-out P: positions."""
    spec = load_run(compose(["experiment=grpo_rookworld_tiny", "tracking=none", *overrides]))
    device = resolve_device(spec.device)
    model, tokenizer = load_policy(spec.model, device)
    problems = heldout_problems(spec.eval.split, spec.data)[0][:positions]
    decoder = make_decoder(model, check_every=spec.sampling.finish_check_every)
    caps = dict(spec.sampling.max_new_tokens)
    answers = []
    for start in range(0, len(problems), BATCH):
        chunk = problems[start:start + BATCH]
        with torch.no_grad():
            rollout = generate_for_problems(decoder, tokenizer, chunk, caps, greedy=True)
        for problem, text in zip(chunk, decode_completions(tokenizer, rollout)):
            answer = parse_policy(text)
            answers.append((problem.truth.fen, answer.best_move if answer else None))
        print(f"{len(answers)}/{len(problems)} positions", flush=True)
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1024, help="the first N held-out P: positions")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    answers = greedy_best_moves(args.overrides, args.positions)
    kinds = [illegal_kind(fen, move) for fen, move in answers]
    in_check = [chess.Board(fen).is_check() for fen, _ in answers]
    for label, wanted in (("in check", True), ("not in check", False)):
        rows = [kind for kind, check in zip(kinds, in_check) if check == wanted]
        illegal = sum(kind != "legal" for kind in rows)
        print(f"{label}: {illegal} illegal of {len(rows)} ({illegal / max(1, len(rows)):.1%})")
    counts = Counter(kind for kind in kinds if kind != "legal")
    print(f"illegal B: moves: {sum(counts.values())} of {len(kinds)}")
    for kind, count in counts.most_common():
        print(f"  {kind}: {count}")
    for (fen, move), kind in [(answer, kind) for answer, kind in zip(answers, kinds) if kind != "legal"][:EXAMPLES]:
        print(f"  {fen}  {move}  ({kind})")


if __name__ == "__main__":
    main()
