"""The coverage report (docs/api-coverage.md and the README's line) is current, and every deliberate omission still
names something lazyflow lacks (an omission that has since been built is a stale excuse)."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import api_coverage


def test_report_and_readme_are_current():
    rep = api_coverage.report()
    with open(api_coverage.DOC) as f:
        assert f.read() == api_coverage.markdown(rep), "run: python tools/api_coverage.py --write"
    with open(api_coverage.README) as f:
        readme = f.read()
    assert readme == api_coverage.readme_with(readme, api_coverage.summary(rep)), (
        "run: python tools/api_coverage.py --write"
    )


def test_no_omission_pattern_covers_a_name_lazyflow_has():
    import torch

    import lazyflow as lf

    stale = []
    for cat, (path, names) in api_coverage.categories(torch).items():
        for n in names:
            if api_coverage._omitted(cat, n) and api_coverage._has(lf, path, n):
                stale.append(f"{cat}: {n}")
    assert not stale, stale


def test_every_omission_pattern_matches_something():
    import torch

    cats = api_coverage.categories(torch)
    unused = [
        (cat, pattern)
        for cat, rules in api_coverage.OMIT.items()
        for pattern, _ in rules
        if not any(re.search(pattern, n.rsplit(".", 1)[-1]) for n in cats[cat][1])
    ]
    assert not unused, unused
