"""The paired seeds a difference needs (rookworld.stats.sample_size), as the markdown table of
docs/sweeps.md, for your own sd of a paired per-seed difference, level and test:
    python tools/power_table.py --sd 0.003 0.0045 --differences 0.002 0.003 0.005 0.01 0.02 --alpha 0.01 --test wilcoxon
    python tools/power_table.py --sd 0.003 0.0045 --differences 0.002 0.003 0.005 0.01 0.02 --alpha 0.05 --test wilcoxon"""
from __future__ import annotations

import argparse

from rookworld.stats.paired import TESTS
from rookworld.stats.sample_size import power_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sd", type=float, nargs="+", required=True, help="sd of the paired differences (columns)")
    parser.add_argument("--differences", type=float, nargs="+", default=[0.005, 0.01, 0.015, 0.02, 0.025, 0.03])
    parser.add_argument("--alpha", type=float, required=True, help="one-sided significance level")
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument("--test", choices=TESTS, required=True)
    args = parser.parse_args()
    print(power_table(args.differences, args.sd, alpha=args.alpha, power=args.power, test=args.test))


if __name__ == "__main__":
    main()
