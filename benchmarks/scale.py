"""Sweep cost at scale: a full dry-run pass over N jobs, against the floor and against kubectl.

    .venv/bin/python -m benchmarks.scale --jobs 1000 --jobs 10000 [--rounds 5] [--profile DIR]

For each N (ascending; the fleet grows in place, so every size is measured in the same run on
the same control plane), it creates the jobs of ``benchmarks.fleet`` up to N (the first
``fleet.SEED`` through the API, the rest as copies written into etcd by ``fleet.Cloner``;
``--api-only`` creates them all through the API), then runs interleaved rounds, the sweeper,
the candidate (if any) and the floor in every order in turn, kubectl last: (A) ``sweeper
--dry-run -o json``, a whole pass as the sweeper's own client-certificate user, so the audit
log attributes its requests; (B) the floor, ``benchmarks.floor``: the same discovery requests
and the same paged list requests (limit and continue) as its own user, each body read and
thrown away, the continue token taken from its tail, nothing decoded: what reading the bytes
alone costs; (C) the cheapest equivalent read with the peer tool, ``kubectl get <resource> -A
-o json --chunk-size=500`` for each listed resource in turn, timed as the sum.

One unmeasured warm-up round comes first (page cache, kubectl's discovery cache); it checks the
sweeper's reports and that the floor sent the sweeper's requests (paths and queries from the
audit log, continue tokens aside). All write their output to a file. It prints, per N, one
``key: value`` per line: ``jobs``, ``sweeper_median_s``, ``floor_median_s``,
``ratio_vs_floor``, ``kubectl_median_s``, ``ratio_vs_kubectl``, ``sweeper_peak_rss_mb`` (the
largest of the sweeper's runs, each its own high-water mark: see ``benchmarks.measure``),
``list_requests`` (the sweeper's list requests in one pass, from the audit log),
``floor_list_requests`` and ``list_requests_expected``, ``discovery_requests`` and
``floor_discovery_requests`` (both from the audit log), then CPU seconds, extremes, the bytes
the floor read per pass, the set-up time and the load average; ``ratio_vs_floor_paired`` (the
median over rounds of each round's own sweeper-to-floor ratio, steadier under a changing load)
and each contender's ``*_rounds_s``; with several sizes, ``rss_growth_pct`` last. Wall times
depend on what else the machine runs: compare the ratios within one run, and read the CPU
seconds beside them.

Every family the sweeper lists is served: the six ``kubeflow.org/v1`` kinds of the Training
Operator (MPIJob among them: only one MPIJob CRD can exist, so mpi-operator's ``v2beta1`` is
not served and the sweeper does not list it), and Trainer v2's TrainJob, whose CRDs
(``trainer.kubeflow.org``) are installed from the cache ``scripts/build-binaries trainer``
fills. The fleet holds no TrainJob, so that list is one empty page, as it is for the floor; no
TrainJob is failed by its deadline, so the pass lists no JobSet. Without the trainer's
manifests in the cache the run goes on without TrainJobs (``trainjobs_listed: no``).

``--candidate DIR`` adds a contender to every round: the sweeper package in DIR (a copy of
``sweeper/`` with a change to try, or the code before one), run as ``python -m sweeper`` from
DIR; its figures are prefixed ``candidate_``, and ``candidate_vs_sweeper_paired`` is the median
of its wall time over the sweeper's, round by round.

``--kubectl-up-to N`` leaves kubectl out above N jobs (its figures print as ``-``): at 50,000
jobs one kubectl round takes a minute and some 4 GB.

``--policy FILE`` runs the sweeper and the candidate with ``--policy FILE`` (the platform's
rules, docs/policy.md), and the floor reads the Namespaces as they then do (one list of
``/api/v1/namespaces``): ``benchmarks/rules.yaml`` judges every job under a rule without
changing a decision, so the reports are checked as without it.

``--pods`` gives every job ``fleet_pods.PER_JOB`` pods with GPUs, written into etcd as the
jobs beyond the seed are (``benchmarks.fleet_pods``): most Running, some jobs stuck starting,
some failed and still holding GPUs, the not-started ones Pending, so the pass's one pod list
(which the floor reads too) has every pod to read and sum. The warm-up round checks the
report's ``held`` counts against the fleet's. Without it the pod list is one empty page.
``--uncached`` has the API server serve every list from etcd rather than its watch cache,
which held 4.3 GB with 10,000 jobs and 40,000 pods, and over 13 GB filling with 50,000 jobs.

``--profile DIR`` runs one more pass of the largest size under pyinstrument (wall-clock
sampling, so time spent waiting for the API server shows as such) and writes ``DIR/scale.txt``
and ``DIR/scale.html``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import itertools
import json
import math
import sys
import time
import urllib.parse
from pathlib import Path
from typing import NamedTuple

import yaml

from benchmarks import fleet, fleet_pods, measure
from devcluster import ControlPlane, audit, binaries, trainer
from devcluster.jobs import GROUP, KINDS, VERSION

SWEEPER_USER = "bench-sweeper"
KUBECTL_USER = "bench-kubectl"
FLOOR_USER = "bench-floor"
TRAINER_GROUP_VERSION = "trainer.kubeflow.org/v1alpha1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--jobs",
        type=int,
        action="append",
        required=True,
        metavar="N",
        help="fleet size to measure (repeatable; measured in ascending order)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="A B rounds per size (default 5)")
    parser.add_argument(
        "--page-size",
        type=int,
        default=500,
        help="the sweeper's --page-size (kubectl's --chunk-size stays 500)",
    )
    parser.add_argument(
        "--threads", type=int, default=16, help="requests in flight while creating the fleet"
    )
    parser.add_argument(
        "--api-only",
        action="store_true",
        help="create every job through the API (slow: 20 to 150 jobs/s) rather than copying "
        "the jobs beyond the seed into etcd",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="profile one more pass of the largest size with pyinstrument",
    )
    parser.add_argument(
        "--candidate",
        type=Path,
        metavar="DIR",
        help="also measure, in the same rounds, the sweeper package found in "
        "DIR (a changed copy of sweeper/): candidate_* figures",
    )
    _contender_options(parser)
    args = parser.parse_args(argv)
    pyinstrument = _checked(parser, args)
    sizes = sorted(set(args.jobs))
    kubectl = binaries.find("kubectl")

    uncached = ("--watch-cache=false",) if args.uncached else ()
    with ControlPlane.start(apiserver_args=uncached) as cp:
        reference = dt.datetime.now(dt.UTC)
        bench = _Bench(
            cp,
            kubectl,
            page_size=args.page_size,
            candidate=args.candidate,
            trainjobs=_install_trainer_crds(cp),
            policy=args.policy.resolve() if args.policy else None,
            pods_at=reference if args.pods else None,
        )
        creator = fleet.Creator(cp, threads=args.threads)
        cloner = fleet.Cloner(cp)
        creator.namespaces()
        created = 0
        peaks: list[float] = []
        for size in sizes:
            began = time.monotonic()
            created_before = created
            requests_before = creator.requests
            through_api = size if args.api_only else min(size, fleet.SEED)
            creator.create(fleet.plan(i, reference) for i in range(created, through_api))
            cloner.clone(range(max(created, through_api), size))
            cloner.wait_until_served(size)
            if args.pods:
                fleet_pods.load(cp, cloner, range(created_before, size), reference, jobs=size)
            setup_s = time.monotonic() - began
            setup_requests = creator.requests - requests_before
            created = size
            figures = {
                "jobs": size,
                "trainjobs_listed": "yes" if bench.empty_lists else "no",
                **bench.measure(
                    size,
                    args.rounds,
                    with_kubectl=args.kubectl_up_to is None or size <= args.kubectl_up_to,
                ),
                "setup_s": setup_s,
                "setup_requests": setup_requests,
                "setup_cloned_jobs": max(0, size - max(created_before, through_api)),
            }
            peaks.append(float(figures["sweeper_peak_rss_mb"] or 0.0))
            measure.print_figures(figures)
            print(flush=True)
        creator.close()
        cloner.close()
        if len(sizes) > 1:
            growth = (peaks[-1] - peaks[0]) / peaks[0] * 100
            measure.print_figures(
                {
                    "rss_growth_pct": growth,
                    "rss_growth_between": f"{sizes[0]} {sizes[-1]}",
                }
            )
        if pyinstrument is not None:
            bench.profile(pyinstrument, args.profile)
    return 0


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path | None:
    """Refuse options that do not go together; the pyinstrument of ``--profile``, if asked."""
    if args.pods and args.api_only:
        parser.error("--pods: the pods follow the copies of the seed's jobs, not --api-only")
    if args.candidate and not (args.candidate / "sweeper" / "__init__.py").is_file():
        parser.error(f"--candidate {args.candidate}: no sweeper package in it")
    if not args.profile:
        return None
    pyinstrument = Path(sys.executable).parent / "pyinstrument"
    if not pyinstrument.exists():
        parser.error("--profile needs pyinstrument: .venv/bin/pip install -e '.[dev]'")
    return pyinstrument


def _contender_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="run the sweeper with --policy FILE (e.g. benchmarks/rules.yaml); the floor "
        "lists the Namespaces as it then does",
    )
    parser.add_argument(
        "--pods",
        action="store_true",
        help=f"give every job {fleet_pods.PER_JOB} pods with GPUs (benchmarks.fleet_pods)",
    )
    parser.add_argument(
        "--uncached",
        action="store_true",
        help="the API server serves lists from etcd, not its watch cache (which takes over "
        "13 GB at 50,000 jobs)",
    )
    parser.add_argument(
        "--kubectl-up-to",
        type=int,
        metavar="N",
        help="leave kubectl out of the rounds above N jobs",
    )


class _Bench:
    """The contenders against one control plane: the sweeper, kubectl, and maybe a candidate."""

    def __init__(
        self,
        cp: ControlPlane,
        kubectl: Path,
        *,
        page_size: int,
        candidate: Path | None,
        trainjobs: bool,
        policy: Path | None = None,
        pods_at: dt.datetime | None = None,
    ) -> None:
        self.cp = cp
        # The fleet's reference time when its jobs have pods, else None.
        self.pods_at = pods_at
        self.policy = policy
        self.kubectl = kubectl
        self.page_size = page_size
        self.candidate = candidate
        self.sweeper_kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        self.kubectl_kubeconfig = cp.user_kubeconfig(KUBECTL_USER, ["system:masters"])
        self.report = cp.workdir / "sweeper-report.json"
        self.kubectl_out = cp.workdir / "kubectl-out.json"
        self.kubectl_cache = cp.workdir / "kubectl-cache"
        self.floor_out = cp.workdir / "floor-out.txt"
        self.floor_credentials = _credentials(
            cp.user_kubeconfig(FLOOR_USER, ["system:masters"]), cp.workdir / "floor-pki"
        )
        # What the sweeper lists, in its order (group/version/plural), and the discovery it
        # sends first: each API group it knows, then each wanted version the group serves
        # (kubeflow.org serves v1 alone here, and the trainer group may not be served).
        self.resources = [f"{GROUP}/{VERSION}/{kind.plural}" for kind in KINDS.values()]
        self.discovery = [
            f"/apis/{GROUP}",
            f"/apis/{GROUP}/{VERSION}",
            "/apis/trainer.kubeflow.org",
        ]
        self.empty_lists = 0
        if trainjobs:
            self.resources.append(f"{TRAINER_GROUP_VERSION}/trainjobs")
            self.discovery.append(f"/apis/{TRAINER_GROUP_VERSION}")
            self.empty_lists = 1
        if policy is not None:
            # The sweeper reads the Namespaces' labels once, after discovery (limit 500).
            self.discovery.append("/api/v1/namespaces?limit=500")

    def sweeper_args(self) -> list[str]:
        return [
            "--kubeconfig",
            str(self.sweeper_kubeconfig),
            "--dry-run",
            "-o",
            "json",
            "--page-size",
            str(self.page_size),
            # Generous: a neighbour's burst of load must not turn a slow pass into exit 5.
            "--timeout",
            "600",
            *(["--policy", str(self.policy)] if self.policy else []),
        ]

    def kubectl_argv(self, resource: str) -> list[str]:
        return [
            str(self.kubectl),
            "--kubeconfig",
            str(self.kubectl_kubeconfig),
            "--cache-dir",
            str(self.kubectl_cache),
            "get",
            resource,
            "-A",
            "-o",
            "json",
            "--chunk-size=500",
        ]

    def sweep(self, *, candidate: bool = False) -> tuple[measure.Run, _Requests]:
        """One pass of the installed sweeper (or the candidate); its list and other requests."""
        if candidate and self.candidate is not None:
            # From DIR: "-m" puts the working directory first on sys.path, so started from
            # the repository it would import the repository's sweeper/ instead.
            argv = [sys.executable, "-m", "sweeper", *self.sweeper_args()]
            env = measure.clean_env(PYTHONPATH=str(self.candidate))
            cwd = self.candidate
        else:
            argv = [str(measure.sweeper_executable()), *self.sweeper_args()]
            env, cwd = None, None
        offset = self.cp.audit_offset()
        result = measure.run(argv, stdout=self.report, env=env, cwd=cwd).check()
        return result, _requests(self.cp.audit_events(user=SWEEPER_USER, since=offset))

    def floor_argv(self) -> list[str]:
        ca, cert, key = self.floor_credentials
        return [
            sys.executable,
            "-m",
            "benchmarks.floor",
            "--server",
            self.cp.server,
            "--ca",
            str(ca),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--page-size",
            str(self.page_size),
            *(f"--discover={path}" for path in self.discovery),
            # The pass's one pod list (the clean-ups' and the GPUs held for nothing).
            "--pods=training.kubeflow.org/job-name",
            *self.resources,
        ]

    def floor(self) -> tuple[measure.Run, _Requests, int]:
        """One floor pass: the run, its list and other requests (audit log), the bytes read."""
        offset = self.cp.audit_offset()
        result = measure.run(self.floor_argv(), stdout=self.floor_out).check()
        requests = _requests(self.cp.audit_events(user=FLOOR_USER, since=offset))
        printed = measure.parse_figures(self.floor_out.read_text(encoding="utf-8"))
        return result, requests, int(printed["bytes"])

    def read_with_kubectl(self) -> tuple[float, float, float, int]:
        """kubectl's reads: total seconds, total CPU seconds, largest peak RSS, lists."""
        offset = self.cp.audit_offset()
        runs = []
        for resource in self.resources:
            group_version, _, plural = resource.rpartition("/")
            group = group_version.partition("/")[0]
            argv = self.kubectl_argv(f"{plural}.{group}")
            runs.append(measure.run(argv, stdout=self.kubectl_out).check())
        events = self.cp.audit_events(user=KUBECTL_USER, since=offset)
        lists = sum(1 for e in events if e.get("verb") == "list")
        return (
            sum(r.wall_s for r in runs),
            sum(r.cpu_s for r in runs),
            max(r.peak_rss_mb for r in runs),
            lists,
        )

    def check_report(self, size: int) -> None:
        """The pass saw every job, planned a touch for exactly the overdue ones, found the held."""
        document = json.loads(self.report.read_text(encoding="utf-8"))
        summary = document["summary"]
        overdue = sum(1 for i in range(size) if fleet.is_overdue(i))
        if summary["jobs"] != size or summary["touch"] != overdue or summary["errors"]:
            raise RuntimeError(
                f"unexpected sweeper report for {size} jobs ({overdue} overdue): {summary}"
            )
        if self.pods_at is not None:
            planned = (fleet_pods.stored(i, self.pods_at) for i in range(size))
            held = fleet_pods.expected_held(planned, self.pods_at)
            found = fleet_pods.reported_held(document)
            if found != held:
                raise RuntimeError(f"held: {found}, the fleet's pods say {held}")

    def warm_up(self, size: int, contenders: list[str], *, with_kubectl: bool) -> None:
        """The unmeasured round, checked: the reports, and the floor's requests.

        Raises:
            RuntimeError: A report is not what the fleet holds, or the floor did not send the
                sweeper's requests (the same paths and queries, continue tokens aside).
        """
        sent: list[str] = []
        for name in contenders:
            run, made = self.sweep(candidate=name == "candidate")
            self.check_report(size)
            measure.print_figures({f"warm_up_{name}_peak_rss_mb": run.peak_rss_mb})
            sent = made.paths if name == "sweeper" else sent
        _, floor_made, _ = self.floor()
        if floor_made.paths != sent:
            raise RuntimeError(
                f"the floor's requests are not the sweeper's:\n{floor_made.paths}\n{sent}"
            )
        if with_kubectl:
            self.read_with_kubectl()

    def contend(self, name: str) -> tuple[measure.Run, _Requests, int | None]:
        """One pass of a contender: the run, its requests, the bytes read (the floor's)."""
        if name == "floor":
            return self.floor()
        run, made = self.sweep(candidate=name == "candidate")
        return run, made, None

    def measure(
        self, size: int, rounds: int, *, with_kubectl: bool = True
    ) -> dict[str, measure.Figure]:
        load_before = measure.load_average()
        contenders = ["sweeper", "candidate"] if self.candidate else ["sweeper"]
        self.warm_up(size, contenders, with_kubectl=with_kubectl)
        passes: dict[str, list[measure.Run]] = {name: [] for name in [*contenders, "floor"]}
        # (list requests, other requests) of each pass: one pair when every pass made the same.
        requests: dict[str, set[tuple[int, int]]] = {n: set() for n in [*contenders, "floor"]}
        kubectl_lists: set[int] = set()
        floor_bytes: set[int] = set()
        reads: list[float] = []
        read_cpu: list[float] = []
        kubectl_rss = 0.0
        # Every order in turn, so each contender follows each other one as often: a pass run
        # right after the floor measured slower (the API server's work after 63 MB read at
        # once, presumably), and turns alone keep the one before each contender the same.
        orders = list(itertools.permutations([*contenders, "floor"]))
        for i in range(rounds):
            for name in orders[i % len(orders)]:
                run, made, read = self.contend(name)
                passes[name].append(run)
                requests[name].add((made.lists, made.others))
                if read is not None:
                    floor_bytes.add(read)
            if not with_kubectl:
                continue
            seconds, cpu, rss, count = self.read_with_kubectl()
            reads.append(seconds)
            read_cpu.append(cpu)
            kubectl_rss = max(kubectl_rss, rss)
            kubectl_lists.add(count)
        kubectl_median = measure.median(reads) if reads else None
        floor_median = measure.median([r.wall_s for r in passes["floor"]])
        figures: dict[str, measure.Figure] = {}
        for name in contenders:
            runs = passes[name]
            median = measure.median([r.wall_s for r in runs])
            prefix = "" if name == "sweeper" else f"{name}_"
            figures.update(
                {
                    f"{name}_median_s": median,
                    "floor_median_s": floor_median,
                    f"{prefix}ratio_vs_floor": median / floor_median,
                    "kubectl_median_s": kubectl_median,
                    f"{prefix}ratio_vs_kubectl": median / kubectl_median
                    if kubectl_median
                    else None,
                    f"{name}_peak_rss_mb": max(r.peak_rss_mb for r in runs),
                    # One figure when every pass made the same requests (they should).
                    f"{prefix}list_requests": _counts({r[0] for r in requests[name]}),
                    f"{prefix}discovery_requests": _counts({r[1] for r in requests[name]}),
                }
            )
        figures.update(
            {
                "floor_list_requests": _counts({r[0] for r in requests["floor"]}),
                "floor_discovery_requests": _counts({r[1] for r in requests["floor"]}),
                # The pass's one pod list, pages of 500 (one empty page without pods).
                "list_requests_expected": fleet.expected_list_requests(size, self.page_size)
                + self.empty_lists
                + (math.ceil(size * fleet_pods.PER_JOB / 500) if self.pods_at else 1),
            }
        )
        figures["rounds"] = rounds
        for name in [*contenders, "floor"]:
            runs = passes[name]
            figures[f"{name}_min_s"] = min(r.wall_s for r in runs)
            figures[f"{name}_max_s"] = max(r.wall_s for r in runs)
            # CPU seconds of the client alone: what the client costs, whatever the load.
            figures[f"{name}_cpu_median_s"] = measure.median([r.cpu_s for r in runs])
        # Paired within each round (the contenders ran one after the other): a slow
        # spell of the machine weighs on both sides of a round's ratio, so these medians move
        # less with the load than the ratio of the medians above.
        for name in contenders:
            prefix = "" if name == "sweeper" else f"{name}_"
            figures[f"{prefix}ratio_vs_floor_paired"] = _paired(passes[name], passes["floor"])
        if self.candidate:
            figures["candidate_vs_sweeper_paired"] = _paired(passes["candidate"], passes["sweeper"])
        for name in [*contenders, "floor"]:
            figures[f"{name}_rounds_s"] = " ".join(f"{r.wall_s:.3f}" for r in passes[name])
        figures["floor_peak_rss_mb"] = max(r.peak_rss_mb for r in passes["floor"])
        figures["floor_mb_read"] = " ".join(f"{b / 2**20:.1f}" for b in sorted(floor_bytes))
        figures.update(
            {
                "kubectl_min_s": min(reads) if reads else None,
                "kubectl_max_s": max(reads) if reads else None,
                "kubectl_cpu_median_s": measure.median(read_cpu) if read_cpu else None,
                "kubectl_peak_rss_mb": kubectl_rss if reads else None,
                "kubectl_list_requests": _counts(kubectl_lists) if reads else None,
                "load_avg_before": load_before,
                "load_avg_after": measure.load_average(),
            }
        )
        return figures

    def profile(self, pyinstrument: Path, directory: Path) -> None:
        """One more pass under pyinstrument, rendered as text and as HTML."""
        directory.mkdir(parents=True, exist_ok=True)
        session = directory / "scale.pyisession"
        argv = [
            str(pyinstrument),
            "-o",
            str(session),
            "-r",
            "pyisession",
            "-m",
            "sweeper",
            *self.sweeper_args(),
        ]
        result = measure.run(argv, stdout=self.report).check()
        for renderer, name in (("text", "scale.txt"), ("html", "scale.html")):
            measure.run(
                [
                    str(pyinstrument),
                    "--load",
                    str(session),
                    "-r",
                    renderer,
                    "-o",
                    str(directory / name),
                ]
            ).check()
        measure.print_figures(
            {"profiled_pass_s": result.wall_s, "profile": str(directory / "scale.txt")}
        )


def _paired(runs: list[measure.Run], against: list[measure.Run]) -> float:
    """The median, over rounds, of one contender's wall time over another's in the same round."""
    return measure.median([a.wall_s / b.wall_s for a, b in zip(runs, against, strict=True)])


def _credentials(kubeconfig: Path, directory: Path) -> tuple[Path, Path, Path]:
    """The CA, client certificate and key of a client-certificate kubeconfig, as PEM files."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for name, data in (
        ("ca.crt", cluster["certificate-authority-data"]),
        ("client.crt", user["client-certificate-data"]),
        ("client.key", user["client-key-data"]),
    ):
        path = directory / name
        path.write_bytes(base64.b64decode(data))
        path.chmod(0o600)
        files.append(path)
    return files[0], files[1], files[2]


def _install_trainer_crds(cp: ControlPlane) -> bool:
    """Serve TrainJobs (the trainer's CRDs from the cache), so the sweeper lists them too."""
    try:
        crds, _webhooks = trainer.manifest_files("trainer")
    except binaries.BinaryMissing as missing:
        print(f"TrainJobs not served, so not listed: {missing}", file=sys.stderr)
        return False
    cp.install_crds(crds)
    return True


class _Requests(NamedTuple):
    """What one client sent in one pass, from the audit log."""

    lists: int
    others: int  # discovery, for a dry-run pass
    paths: list[str]  # each request's path and query, continue token aside, sorted


def _requests(events: list[audit.AuditEvent]) -> _Requests:
    lists = sum(1 for e in events if e.get("verb") == "list")
    paths = []
    for event in events:
        path, _, query = str(event.get("requestURI", "")).partition("?")
        kept = sorted(p for p in urllib.parse.parse_qsl(query) if p[0] != "continue")
        paths.append(f"{path}?{urllib.parse.urlencode(kept)}" if kept else path)
    return _Requests(lists, len(events) - lists, sorted(paths))


def _counts(values: set[int]) -> str:
    return " ".join(str(n) for n in sorted(values))


if __name__ == "__main__":
    sys.exit(main())
