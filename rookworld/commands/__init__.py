"""The `python -m` commands besides the runs, never imported by the library (each a parser and a main
over library code):

    annotate.py               positions -> engine-annotated JSONL, A: cases, action values (data/annotation.py)
    check_positions.py        new positions in check from annotated ones (data/check_positions.py)
    mirror.py                 colour-flipped copies of annotated positions (data/mirror.py)
    derived.py                the parser and run these two share
    caps.py                   each task's longest correct completion against the config's token caps
    pass_rates.py             the starting policy's pass rates, for difficulty.pass_rates
    repeats.py                how often a run's A: training transitions repeat
    load_time.py              how long the bundled data takes to load
    label_stability.py        how engine labels move with the search budget
    agreement.py              labels against a deeper reference search
    action_value_agreement.py action values against the labels' best moves
    tokenizer.py              rebuilds the bundled tiny tokenizer
"""
