"""Print how fast the local GitHub the tests run against answers.

- spec load: parsing and indexing GitHub's OpenAPI description (once per test session);
- route match: finding the operation of one request path;
- round trip: PyGithub `get_pull` + `get_files` against a running fake, each request checked
  against the description, with the git-backed repository behind it.

Figures, not assertions: medians over --runs.

    python benchmarks/ghfake_speed.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from github import Auth, Github

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's bot, not an installed one
from ghfake import GitHubFake, ensure_assets
from ghfake.spec import Spec, load_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    assets = ensure_assets()  # the download, if any, stays outside the timings

    start = time.perf_counter()
    Spec(assets.spec_path)
    print(f"spec load      {time.perf_counter() - start:8.2f} s")

    spec = load_spec(assets.spec_path)
    rounds = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(200):
            spec.match("PATCH", "/repos/o/r/check-runs/5")
        rounds.append((time.perf_counter() - start) / 200)
    print(f"route match    {statistics.median(rounds) * 1e6:8.1f} µs")

    with tempfile.TemporaryDirectory(prefix="ghfake-speed-") as tmp:
        fake = GitHubFake(spec, assets, Path(tmp)).start()
        try:
            fake.create_repo("acme", "kernels", {"README.md": "hello\n"})
            files = {f"crate/src/k{i}.rs": f"fn k{i}() {{}}\n" for i in range(3)}
            fake.commit("acme/kernels", "feature", files, "add kernels", author="alice")
            fake.open_pr("acme/kernels", None, "feature", "Add kernels", "alice")
            gh = Github(
                base_url=fake.base_url,
                auth=Auth.Token("bench-token"),
                retry=None,
                seconds_between_requests=None,
                seconds_between_writes=None,
            )
            pr = gh.get_repo("acme/kernels").get_pull(1)
            trips = []
            for _ in range(args.runs):
                start = time.perf_counter()
                pr.update()
                list(pr.get_files())
                trips.append(time.perf_counter() - start)
        finally:
            fake.stop()
    print(
        f"round trip     {statistics.median(trips) * 1000:8.1f} ms  (get_pull + get_files, median of {args.runs})"
    )


if __name__ == "__main__":
    main()
