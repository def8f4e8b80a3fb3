"""`dnnbench`: benchmark deep-learning frameworks head to head and explain the results.

Every user error ends in one line on stderr naming what was wrong and how to fix it,
exit status 2; failed benchmark runs are stored as failed rows, not raised.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from frameworks.contract import SUPPORT
from harness import noise, workmeter
from harness.cli_input import (
    MAX_SERVERS,
    Parser,
    UserError,
    field_type,
    image_reference,
    number,
    one_line,
    user_errors,
)
from harness.store import require_file, resumed

DEFAULT_DB = "results/dnnbench.db"

EPILOG = """examples:
  dnnbench env setup torch                       create the PyTorch environment (cached)
  dnnbench models --image-size 224               parameters, GMACs, gradient sizes
  dnnbench run --framework torch --model resnet50 --batch 8 --image-size 64 --steps 20
  dnnbench run --experiment experiments/default.toml --report results/report.html
  dnnbench report --db results/dnnbench.db -o results/report.html
"""


def _framework_list(text: str) -> list[str]:
    """An argparse type: comma-separated registered framework names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUPPORT]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {'unknown framework(s) ' + ', '.join(unknown) if unknown else 'empty'}"
            f"; known: {', '.join(SUPPORT)}")
    return names


def _flag(name: str) -> str:
    from frameworks.contract import FIELDS

    return FIELDS[name].flag or "--" + name.replace("_", "-")


def _add_spec_flags(p: argparse.ArgumentParser, title: str = (
        "one configuration (instead of --experiment; with it, each flag holds over the "
        "file's [defaults] and [matrix]: --framework mxnet runs MXNet's share)")) -> None:
    """One flag per RunSpec field, generated from its declaration (frameworks/contract.py
    FIELDS): the flag's type, choices and help cannot drift from what validation checks."""
    from frameworks.contract import FIELDS

    g = p.add_argument_group(title)
    for name, f in FIELDS.items():
        if f.type is bool:
            g.add_argument(_flag(name), dest=name, action="store_true", default=None,
                           help=f.help.replace("%", "%%"))
            continue
        rule = "" if f.choices or f.type is str else f" ({f.rule()})"
        # the declared rule checks the value (one line naming the field and the rule)
        metavar = ("{" + ",".join(f.choices) + "}" if f.choices
                   else {int: "N", float: "X"}.get(f.type, "TEXT"))
        g.add_argument(_flag(name), dest=name, type=field_type(name), metavar=metavar,
                       help=(f.help + rule).replace("%", "%%"))


def build_parser() -> argparse.ArgumentParser:
    from runners.container import ENGINES

    parser = Parser(
        prog="dnnbench", description=__doc__.splitlines()[0],
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_env = sub.add_parser("env", help="per-framework environments (cached, isolated)")
    env_sub = p_env.add_subparsers(dest="env_command", metavar="ACTION")
    p_setup = env_sub.add_parser("setup", help="create or reuse a framework's environment")
    p_setup.add_argument("frameworks", nargs="*", metavar="FRAMEWORK",
                         help="default: every registered framework (" + ", ".join(SUPPORT)
                         + ")")
    p_setup.add_argument("--variant", choices=["cpu", "cuda"], default="cpu",
                         help="cpu (this machine) or cuda (GPU hosts)")
    p_setup.add_argument("--force", action="store_true", help="rebuild even if cached")
    hvd = p_setup.add_mutually_exclusive_group()
    hvd.add_argument("--no-horovod", action="store_true",
                     help="skip the Horovod build (3 min per framework; reuses a cached "
                          "build with it): every strategy but 'horovod' runs")
    hvd.add_argument("--horovod-for", metavar="FW[,FW]", type=_framework_list,
                     help="compile Horovod only into these frameworks' environments; the "
                          "others are built as with --no-horovod (make test: torch)")
    p_setup.add_argument("--images", metavar="FW[,FW]", type=_framework_list,
                         help="also make these frameworks' container images (podman or "
                              "docker, from the local Debian base; loaded from the cache's "
                              "archive when one is there), each right after its environment "
                              "in the same build slot, with Horovod exactly when the "
                              "environment has it (make test: torch,tensorflow,mxnet)")
    p_setup.add_argument("--jobs", "-j", type=number(int, 1, 64), default=1, metavar="N",
                         help="build N environments at once (default 1). A Horovod compile "
                              "starts first and uses every core; the other installs "
                              "(single-threaded pip) overlap it")
    env_sub.add_parser("list", help="installed environments and versions")
    p_path = env_sub.add_parser("path", help="print an environment's directory")
    p_path.add_argument("framework", type=field_type("framework"))
    p_path.add_argument("--variant", choices=["cpu", "cuda"], default="cpu")

    p_models = sub.add_parser("models", help="cost-model summary of every network")
    p_models.add_argument("--image-size", type=field_type("image_size"), default=224)
    p_models.add_argument("--classes", type=field_type("num_classes"), default=1000)
    p_models.add_argument("--layers", metavar="MODEL", help="per-layer table of one network")

    p_run = sub.add_parser(
        "run", help="run one configuration or an experiment file",
        description="Run benchmarks and store every raw measurement in the results DB. "
                    "Give either --experiment FILE or --framework and --model. With "
                    "--experiment, a run setting given as a flag holds for every run of the "
                    "file, over its [defaults] and its [matrix]: `-e "
                    "experiments/shi2017-emulated.toml --framework mxnet` runs only MXNet's "
                    "share of the sweep, stored as that experiment's runs.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p_run.add_argument("--experiment", "-e", help="TOML experiment file (see experiments/)")
    p_run.add_argument("--name", help="experiment name to store runs under")
    p_run.add_argument("--db", default=DEFAULT_DB, help=f"results database ({DEFAULT_DB})")
    p_run.add_argument("--csv", help="also export this experiment's runs as CSV")
    p_run.add_argument("--report", help="also render the HTML report to this path")
    p_run.add_argument("--retry-failed", action="store_true",
                       help="run again configurations stored as failed or timed out")
    p_run.add_argument("--remeasure-disturbed", action="store_true",
                       help="measure again ok runs taken while the machine was disturbed "
                            f"(noise meter below {100 * noise.DISTURBED:.0f}%% of the sweep's "
                            f"usual best) and small runs (<= {workmeter.SMALL_WORKERS} "
                            "parameter-server workers) on a slow CPU (work meter: workers "
                            f"spent more than {workmeter.SLOW:.1f}x their workload's usual CPU "
                            "per step); each new row replaces the old one only once it is "
                            "stored")
    p_run.add_argument("--verbose", "-v", action="store_true", help="stream worker output")
    p_run.add_argument("--ignore-memory-check", action="store_true",
                       help="run even when the cost model estimates more memory than this "
                            "host has (the estimate is rough; e.g. for swap or huge pages)")
    g_sl = p_run.add_argument_group(
        "Slurm (with --launcher slurm; an experiment file's [slurm] table sets the same, and "
        "these flags override it)")
    g_sl.add_argument("--dry-run", metavar="DIR",
                      help="write each run's sbatch script to DIR and submit nothing")
    g_sl.add_argument("--submit", action="store_true",
                      help="submit every pending run at once (runs asking for the same "
                           "allocation as one job array), record the jobs in --db and "
                           "return; `dnnbench collect` stores their results later, "
                           "`dnnbench status` shows them")
    g_sl.add_argument("--partition", help="#SBATCH --partition")
    g_sl.add_argument("--account", help="#SBATCH --account")
    g_sl.add_argument("--qos", help="#SBATCH --qos")
    g_sl.add_argument("--constraint", help="#SBATCH --constraint (node features)")
    g_sl.add_argument("--gpus-per-node", type=number(int, 0, 64), default=0,
                      help="#SBATCH --gpus-per-node")
    g_sl.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                      help="extra #SBATCH line, e.g. --qos=debug (repeatable)")
    g_sl.add_argument("--slurm-dir", default="results/slurm",
                      help="where scripts and job output go (results/slurm)")
    g_ct = p_run.add_argument_group("Containers (with --env container)")
    g_ct.add_argument("--container-engine", default="auto",
                      choices=["auto", *ENGINES],
                      help="auto: podman if installed, else docker")
    g_ct.add_argument("--container-image", default="",
                      help="run this image instead of the framework's own (a tag, or for "
                           "apptainer a .sif file: see docker/README.md)")
    p_run.add_argument("--telemetry-interval", type=number(float, 0, 3600), default=1.0,
                       metavar="S",
                       help="sample CPU, memory (and GPU via NVML) every S seconds (1; "
                            "0: off)")
    _add_spec_flags(p_run)

    p_rep = sub.add_parser("report", help="render the HTML report from a results DB")
    p_rep.add_argument("--db", default=DEFAULT_DB)
    p_rep.add_argument("--experiment", help="only this experiment")
    p_rep.add_argument("--format", choices=["html", "md", "csv"], default="html",
                       help="html (self-contained page), md (tables for papers/READMEs), "
                            "csv (a directory with one file per table)")
    p_rep.add_argument("-o", "--output", help="file (html, md) or directory (csv); default "
                                              "results/report.html|.md|-csv/")

    p_pred = sub.add_parser(
        "predict", help="predict t_iter, throughput and scaling efficiency",
        description="Performance model: t_iter = io + h2d + forward + backward + update + "
                    "exposed communication. Compute comes from --t-forward/--t-backward, a "
                    "--device-preset FLOPs estimate, or a stored single-device run in --db.",
        epilog="examples:\n  dnnbench predict --framework torch --model resnet50 --batch 32 "
               "--nodes 4 --devices-per-node 4 --strategy allreduce --link ib56 "
               "--intra pcie3 --device-preset p40\n  dnnbench predict --model resnet50 "
               "--batch 16 --image-size 64 --framework torch --workers 1,2,4,8,16 --link "
               "10gbe\n  dnnbench predict --validate --db results/default.db\n"
               "  dnnbench predict --validate --holdout --db results/scaling-emulated.db\n"
               "  dnnbench predict --validate --holdout --db r1.db --db r2.db --db r3.db  "
               "(three repeats of one sweep)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_pred.add_argument("--framework", type=field_type("framework"), default="torch")
    p_pred.add_argument("--model", default="resnet50")
    p_pred.add_argument("--batch", type=field_type("batch_size"), default=32,
                        help="per-device batch")
    p_pred.add_argument("--image-size", type=field_type("image_size"), default=224)
    p_pred.add_argument("--nodes", type=number(int, 1, 1_000_000), default=1)
    p_pred.add_argument("--devices-per-node", type=field_type("devices_per_node"), default=1)
    p_pred.add_argument("--workers", help="comma list of total workers: a scaling table")
    p_pred.add_argument("--strategy", default="allreduce", choices=["allreduce", "horovod", "ps"])
    p_pred.add_argument("--algorithm", default="ring",
                        choices=["ring", "recursive-doubling", "tree", "hierarchical"])
    p_pred.add_argument("--link", default="10gbe", help="inter-node link profile (links.toml)")
    p_pred.add_argument("--intra", default="shm", help="intra-node link profile")
    p_pred.add_argument("--no-overlap", action="store_true", help="communication after backward")
    p_pred.add_argument("--fusion-mb", type=number(float, 0, 65536, low_open=True),
                        help="fusion buffer MiB (strategy default)")
    p_pred.add_argument("--ps", type=number(int, 1, 100_000), default=1,
                        help="parameter servers (strategy ps)")
    p_pred.add_argument("--placement", default="greedy", choices=["greedy", "round-robin", "mxnet"],
                        help="PS placement rule (mxnet: its key hashing and big-array split)")
    p_pred.add_argument("--device-preset", help="FLOPs estimate: p40 | v100 | a100 | knl")
    p_pred.add_argument("--t-forward", type=number(float, 0, 3600, low_open=True),
                        help="seconds per iteration, one device")
    p_pred.add_argument("--t-backward", type=number(float, 0, 3600, low_open=True))
    p_pred.add_argument("--t-update", type=number(float, 0, 3600), default=0.0)
    p_pred.add_argument("--db", action="append", metavar="DB",
                        help="measurements for compute and --validate (default "
                             f"{DEFAULT_DB}); with --validate --holdout, give --db once "
                             "per repeat of the same sweep (a database each): every "
                             "repeat is validated alone, and the verdict is the median "
                             "sweep's, each configuration from its median repeat")
    p_pred.add_argument("--validate", action="store_true",
                        help="predicted vs measured for every stored run the model covers")
    p_pred.add_argument("--holdout", action="store_true",
                        help="with --validate: fit every input only on runs with <= 2 "
                             "workers, then predict every run with more (a prediction, "
                             "not a fit); exits 1 if a strategy misses the targets "
                             "(median |error| <= 10%%, worst <= 25%%)")
    p_pred.add_argument("--pooled-links", action="store_true",
                        help="with --holdout: fit one link per library, link and CPU limit "
                             "over all networks' 2-worker runs, instead of each curve's "
                             "link from its own 2-worker run")
    p_pred.add_argument("--median-fit", action="store_true",
                        help="with --holdout and several --db: also predict each repeat's "
                             "runs with > 2 workers from the median sweep's small runs, "
                             "so a repeat's error shows its own large runs' noise without "
                             "its small runs' (one more validation per repeat)")
    p_pred.add_argument("--replicate", type=number(int, 0, 99), metavar="J",
                        help="with --holdout and one --db: a configuration measured more "
                             "than once in the sweep (the replicate axis) is its replicate "
                             "J, not its median replicate: what the sweep would have said "
                             "had it measured each configuration once")
    p_pred.add_argument("--server-requests", action="store_true",
                        help="with --holdout: the parameter servers' CPU gets a cost per "
                             "request (each worker's push and pull of each piece a server "
                             "holds, whatever its bytes) beside its cost per byte, fitted "
                             "where the small runs' servers hold different pieces per byte "
                             "(harness/perfmodel/README.md, \"What a request costs a server\")")
    p_pred.add_argument("--worker-wire", action="store_true",
                        help="with --holdout: a parameter-server worker's CPU gets a cost "
                             "per byte it moves to or from another host (its pushes and "
                             "pulls across the link), fitted on the small runs' workers' "
                             "telemetry; without it a worker's CPU per step is its small "
                             "runs' at every scale (harness/perfmodel/README.md, "
                             "\"What a byte on the wire costs a worker\")")
    p_pred.add_argument("--packet-work", action="store_true",
                        help="with --holdout: every parameter-server process's CPU grows by "
                             "the share of the busy cores the kernel's packet work takes "
                             "(softirq time, charged to whichever process runs), fitted as "
                             "softirq time per byte across the link on the small runs' "
                             "machine telemetry (harness/perfmodel/README.md, \"Neighbours that "
                             "move bytes\")")
    p_pred.add_argument("--experiment", help="with --validate: only this experiment's runs")
    p_pred.add_argument("--links", action="store_true", help="list link profiles and exit")

    p_ps = sub.add_parser("ps-placement", help="parameter-server load per placement policy")
    p_ps.add_argument("--model", default="resnet50")
    p_ps.add_argument("--ps", default="1,2,4,8,16,32,54,64",
                      help="server counts: comma list or range like 1..64")
    p_ps.add_argument("--detail", type=number(int, 1, MAX_SERVERS), metavar="P",
                      help="bytes per server at P servers")
    p_ps.add_argument("--db", help="also show placements recorded by PS runs in this DB")

    p_paper = sub.add_parser(
        "paper", help="reproduce the source papers' headline shapes, with the source of "
        "every input, sensitivity bands and the papers' claims checked",
        description=__import__("harness.perfmodel.papers").perfmodel.papers.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_paper.add_argument("which", choices=["cori", "shi"],
                         help="cori: Mathuriya et al. 2017; shi: Shi, Wang & Chu 2017")
    p_paper.add_argument("--db", help="also check the claims on the scaling curves measured "
                         "in this results DB (e.g. experiments/scaling-emulated.toml's)")
    p_paper.add_argument("--table", action="store_true",
                         help="also print every modelled point (workers x servers, links)")

    p_cb = sub.add_parser("commbench", help="allreduce size sweep per library; fits alpha/beta",
                          description=__import__("harness.commbench").commbench.__doc__,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    p_cb.add_argument("--library", default="torch-gloo",
                      help="comma list of: " + ", ".join(
                          __import__("harness.commbench").commbench.LIBRARIES)
                      + " (mpi: mpi4py, the reference; *-nccl: GPUs; mxnet-kvstore: PS "
                        "push+pull); default torch-gloo")
    p_cb.add_argument("--ranks", type=number(int, 1, 256), default=2)
    p_cb.add_argument("--sizes", default="4..128M", help="'4..128M' (x4 steps) or '1K,1M,64M'")
    p_cb.add_argument("--iters", type=number(int, 1, 100_000), default=10,
                      help="timed repetitions per size")
    p_cb.add_argument("--link", default="local",
                      help="label for the link being measured; with --hosts, the emulated "
                           "link rate (1gbit, unshaped...)")
    p_cb.add_argument("--hosts", type=number(int, 0, 64), default=0,
                      help="run the ranks across this many emulated hosts (needs root)")
    p_cb.add_argument("--db", default=DEFAULT_DB)
    p_cb.add_argument("--timeout", type=field_type("timeout_s"), default=600)

    p_ver = sub.add_parser(
        "verify", help="prove the frameworks compute the same function (same weights in)",
        description=__import__("harness.verify").verify.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_ver.add_argument("--models", default="alexnet,googlenet,resnet50")
    p_ver.add_argument("--frameworks", default=",".join(SUPPORT),
                       help="comma-separated (default: every registered framework)")
    p_ver.add_argument("--image-size", type=field_type("image_size"), default=64)
    p_ver.add_argument("--classes", type=field_type("num_classes"), default=10)
    p_ver.add_argument("--lr", type=field_type("lr"), default=0.1)
    p_ver.add_argument("--perturb", action="append", default=[], metavar="FRAMEWORK:TENSOR",
                       help="scale one tensor (e.g. conv1.weight) by 1.05 for one framework, "
                            "to see the check fail")
    p_ver.add_argument("--db", default=DEFAULT_DB, help="store the comparison here too")
    p_ver.add_argument("--no-store", action="store_true")

    p_res = sub.add_parser("results", help="list stored runs; export CSV/JSON")
    p_res.add_argument("--db", default=DEFAULT_DB)
    for name in ("experiment", "framework", "model", "strategy", "mode", "status"):
        p_res.add_argument(f"--{name}", help=f"only runs with this {name}")
    p_res.add_argument("--csv", help="write the runs as CSV here")
    p_res.add_argument("--json", help="write the runs as JSON here (one object per run)")
    p_res.add_argument("--trace", metavar="RUN_ID",
                       help="write a Chrome/Perfetto trace of a breakdown run (-o FILE)")
    p_res.add_argument("-o", "--output", default="trace.json", help="trace file (trace.json)")
    p_res.add_argument("--verdicts", action="store_true",
                       help="every pair of frameworks per network and settings: which is "
                            "faster, by how much, its 95%% interval (paired over interleaved "
                            "rounds where they were measured together) and whether the report "
                            "states it with confidence")
    p_res.add_argument("--scaling", action="store_true",
                       help="every multi-worker run with its 1-worker baseline and weak-"
                            "scaling efficiency (the report's scaling rows)")
    p_res.add_argument("--intervals", action="store_true",
                       help="each run's 95%% interval over its sweep and its repeat interval "
                            "(widened by this host's between-sweep drift: dnnbench history)")

    p_data = sub.add_parser(
        "data", help="make or check an ImageNet-style JPEG dataset",
        description="Real input pipelines read an ImageNet-style folder: ROOT/<class>/<img>.jpg.",
        epilog="examples:\n  dnnbench data make --images 512 --size 160 --classes 10 data/tiny\n"
               "  dnnbench data check data/tiny --world 2\n"
               "  dnnbench run --framework torch --model resnet50 --batch 16 --image-size 64 "
               "--data data/tiny\n  dnnbench run --framework torch --model resnet50 --batch 16 "
               "--image-size 64 --data data/tiny --mode loader",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    data_sub = p_data.add_subparsers(dest="data_command", metavar="ACTION")
    p_make = data_sub.add_parser("make", help="write a synthetic-content JPEG dataset")
    p_make.add_argument("directory", help="new (or empty) folder to write")
    p_make.add_argument("--images", type=number(int, 1, 10_000_000), default=512,
                        help="total images (512)")
    p_make.add_argument("--size", type=number(int, 8, 4096), default=160,
                        help="typical side in px; each side varies 0.75x..1.5x (160)")
    p_make.add_argument("--classes", type=number(int, 1, 100_000), default=10,
                        help="class folders (10)")
    p_make.add_argument("--seed", type=field_type("seed"), default=0)
    p_check = data_sub.add_parser(
        "check", help="decode a dataset in each framework's loader and compare",
        description="One ordered pass of each framework's training pipeline over the dataset: "
                    "label counts must agree, shards must be disjoint; corrupt files are "
                    "skipped and counted. Exit status 1 if the frameworks disagree.")
    p_check.add_argument("directory")
    p_check.add_argument("--frameworks", default=",".join(SUPPORT),
                         help="comma-separated (default: every registered framework)")
    p_check.add_argument("--world", type=number(int, 1, 4096), default=1,
                         help="shard over this many workers")
    p_check.add_argument("--image-size", type=field_type("image_size"), default=64)
    p_check.add_argument("--loader-workers", type=field_type("loader_workers"), default=2)
    p_check.add_argument("--json", help="also write every rank's report here")

    p_cl = sub.add_parser(
        "cluster", help="an emulated multi-host cluster on this machine (namespaces + tc)",
        description="Emulated hosts: network namespaces dnb-h0..N-1 (10.77.0.1..) joined by "
                    "veth pairs through a bridge, each host's link shaped with tc tbf. No "
                    "netem here: rates only, latency cannot be emulated. Needs root. Runs "
                    "with a `link` field create (and remove) one themselves.",
        epilog="examples:\n  dnnbench cluster up --hosts 2 --link 1gbit\n"
               "  dnnbench cluster up --hosts 4 --link 1gbit --cpus-per-host 0.5\n"
               "  dnnbench cluster "
               "status\n  dnnbench run --framework torch --model resnet50 --strategy "
               "allreduce --nodes 2 --link 1gbit\n  dnnbench commbench --library torch-gloo "
               "--hosts 2 --link 1gbit\n  dnnbench cluster down",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cl_sub = p_cl.add_subparsers(dest="cluster_command", metavar="ACTION")
    p_up = cl_sub.add_parser("up", help="create N hosts (replacing any previous cluster)")
    p_up.add_argument("--hosts", type=number(int, 1, 64), default=2)
    p_up.add_argument("--link", default="unshaped", help="rate per host: 1gbit, 500mbit, "
                                                          "unshaped (default)")
    p_up.add_argument("--cpus-per-host", type=number(float, 0, 4096), default=0.0,
                      metavar="C", help="CPUs of compute per host: a cgroup CPU quota on the "
                                        "cores its share spans, so a host's speed does not "
                                        "depend on its neighbours (hosts x C <= cores; 0: "
                                        "hosts share every core, the default)")
    p_up.add_argument("--memory-per-host", type=number(int, 0, 64 * 1024 * 1024), default=0,
                      metavar="MIB", help="memory limit per host in MiB (needs "
                                          "--cpus-per-host; 0: none)")
    cl_sub.add_parser("down", help="remove every emulated host (idempotent)")
    cl_sub.add_parser("status", help="hosts, addresses, shaped rates, interface bytes")

    p_img = sub.add_parser(
        "image", help="build a framework's container image (docker/)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  dnnbench image build torch                     # base "
               "python:3.11-slim-bookworm\n  dnnbench image build torch --base-image local"
               "   # no registry: a debootstrap base made here\n  dnnbench image build "
               "torch --cuda           # base: nvidia/cuda devel, Ubuntu 22.04\n"
               "  dnnbench run --framework torch --model resnet50 --env container\n"
               "see docker/README.md")
    img_sub = p_img.add_subparsers(dest="image_command", metavar="ACTION")
    p_ib = img_sub.add_parser("build", help="podman/docker build of docker/Dockerfile for a "
                                            "framework (skipped when the image is current)")
    p_ib.add_argument("framework", type=field_type("framework"))
    p_ib.add_argument("--cuda", action="store_true", help="the CUDA variant")
    p_ib.add_argument("--engine", default="auto", choices=["auto", "podman", "docker"])
    p_ib.add_argument("--base-image", type=image_reference,
                      help="BASE_IMAGE build argument (default python:3.11-slim-bookworm for "
                           "CPU, an nvidia/cuda devel Ubuntu 22.04 image for CUDA; 'local': a "
                           "Debian base made here with debootstrap, for hosts without a "
                           "registry)")
    p_ib.add_argument("--rebuild", action="store_true", help="build even if current")
    p_ib.add_argument("--no-horovod", action="store_true",
                      help="skip compiling Horovod (about 3 min less; the image then serves "
                           "every strategy but horovod; an image with Horovod, if built, "
                           "is used instead)")
    p_ib.add_argument("--dry-run", action="store_true", help="print the command only")
    img_sub.add_parser("base", help="make the local Debian base image (debootstrap + import; "
                                    "what --base-image local uses)")

    p_cmp = sub.add_parser(
        "compare", help="the same configurations in two results DBs: changed or noise?",
        description=__import__("harness.compare").compare.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_cmp.add_argument("a", metavar="A.db", help="baseline results database")
    p_cmp.add_argument("b", metavar="B.db", help="results database to compare with it")
    p_cmp.add_argument("--experiment", help="only runs of this experiment (in both)")
    p_cmp.add_argument("--fail-on-slower", action="store_true",
                       help="exit 1 if any configuration is slower beyond noise (for CI)")

    p_hist = sub.add_parser(
        "history", help="this host's sweeps: how far results move between sweeps",
        description=__import__("harness.repeat").repeat.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_hist.add_argument("--add", nargs="+", metavar="DB", default=[],
                        help="seed the history from older results databases (each "
                             "experiment in one counts as one sweep)")
    p_hist.add_argument("--clear", action="store_true",
                        help="forget every recorded sweep (intervals go back to within-sweep)")

    p_col = sub.add_parser(
        "collect", help="store the results of Slurm jobs submitted with run --submit",
        description=__import__("harness.submit").submit.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p_col.add_argument("--db", default=DEFAULT_DB, help=f"results database ({DEFAULT_DB})")
    p_col.add_argument("--experiment", help="only this experiment's jobs")
    p_col.add_argument("--wait", action="store_true",
                       help="poll until every submitted job has ended and is stored")
    p_col.add_argument("--poll", type=number(float, 1, 3600), default=10.0, metavar="S",
                       help="seconds between polls with --wait (10)")
    p_st = sub.add_parser("status", help="submitted Slurm jobs per experiment: pending, "
                                         "running, ended, collected")
    p_st.add_argument("--db", default=DEFAULT_DB, help=f"results database ({DEFAULT_DB})")
    p_st.add_argument("--experiment", help="only this experiment")

    sub.add_parser("clean", help="remove what dnnbench processes that died left behind",
                   description="Removes containers started by dnnbench processes that no "
                               "longer run (killed, lost session) and their stale emulated-"
                               "cluster leases. Never touches anything a live process uses.")

    p_plan = sub.add_parser("plan", help="show an experiment's runs before running it")
    p_plan.add_argument("experiment_file", nargs="?",
                        help="TOML experiment file (or -e FILE, as `dnnbench run` takes it)")
    p_plan.add_argument("--experiment", "-e", dest="experiment_flag", metavar="FILE",
                        help="the same file, spelled as `dnnbench run -e FILE` spells it")
    p_plan.add_argument("--db", help="also show which runs are already stored: what `dnnbench "
                                     "run -e FILE --db DB` would measure now (resume)")
    p_plan.add_argument("--retry-failed", action="store_true",
                        help="count stored failures as to measure, as `run --retry-failed` "
                             "does")
    _add_spec_flags(p_plan, "run settings, as `dnnbench run -e FILE` takes them: each holds "
                            "over the file's [defaults] and [matrix]")
    return parser


def _spec_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from frameworks.contract import FIELDS

    return {k: getattr(args, k) for k in FIELDS if getattr(args, k, None) is not None}


def cmd_env(args: argparse.Namespace) -> int:
    from harness import envs

    if args.env_command == "setup":
        frameworks = args.frameworks or list(SUPPORT)
        unknown = [fw for fw in frameworks if fw not in SUPPORT]
        if unknown:
            raise UserError(f"unknown framework {', '.join(map(repr, unknown))}; "
                            f"known: {', '.join(SUPPORT)}")
        if args.horovod_for is not None:
            frameworks = list(dict.fromkeys([*args.horovod_for, *frameworks]))
        horovod = {fw: not args.no_horovod and (args.horovod_for is None
                                                or fw in args.horovod_for)
                   for fw in frameworks}
        if args.images:
            frameworks = list(dict.fromkeys([*frameworks, *args.images]))
            horovod.update({fw: horovod.get(fw, not args.no_horovod) for fw in args.images})
        envs.setup_many(frameworks, args.variant, horovod, force=args.force, jobs=args.jobs,
                        then=_image_step(args.images) if args.images else None)
    elif args.env_command == "list":
        rows = envs.installed()
        if not rows:
            print(f"no environments in {envs.cache_dir() / 'envs'}; "
                  "run: dnnbench env setup torch")
        for r in rows:
            mark = "current" if r["current"] else "stale  "
            print(f"{r['framework']:<11} {r['variant']:<5} {r['version']:<16} "
                  f"py{r['python']:<8} {mark} {r['path']}")
    elif args.env_command == "path":
        print(envs.find(args.framework, args.variant).path)
    else:
        raise UserError("env needs an action: setup, list or path (see dnnbench env --help)")
    return 0


def _image_step(frameworks: list[str]):
    """What `env setup --images` runs on each environment once it is ready: its image, for
    the frameworks named. The engine is checked first, before any environment is built."""
    from harness import images

    try:
        engine = images.engine("auto")
    except images.ImageError as exc:
        raise UserError(f"--images: {exc}") from None

    def step(env) -> None:
        if env.framework in frameworks:
            images.build_for(env, engine)
    return step


def cmd_models(args: argparse.Namespace) -> int:
    import models
    from models.cost import ShapeError, cost

    if args.layers:
        c = cost(args.layers, args.image_size, args.classes)
        print(f"{'layer':<34} {'op':<16} {'output':<16} {'params':>11} {'MMACs':>10}")
        for lc in c.layers:
            shape = "x".join(map(str, lc.out_shape))
            print(f"{lc.name:<34} {lc.kind:<16} {shape:<16} {lc.params:>11,} "
                  f"{lc.macs / 1e6:>10.2f}")
        return 0
    print(f"{'network':<10} {'params':>12} {'GMACs':>8} {'tensors':>8} {'grad MB':>9} "
          f"{'act MB/img':>11}  at {args.image_size} px, {args.classes} classes")
    for name in models.NETWORKS:
        try:
            c = cost(name, args.image_size, args.classes)
        except ShapeError as exc:
            print(f"{name:<10} cannot be built: {str(exc).split('; ')[-1]}")
            continue
        print(f"{name:<10} {c.params:>12,} {c.macs / 1e9:>8.3f} {len(c.tensors):>8} "
              f"{c.gradient_bytes / 1e6:>9.2f} {c.activation_bytes / 1e6:>11.2f}")
    return 0


def _check_slurm_args(args: argparse.Namespace) -> None:
    """Text that reaches a script or an engine's option parser: no way out of its line
    or its argument."""
    from runners.slurm import SlurmError, check_script_text

    try:
        for flag, value in (("--partition", args.partition), ("--account", args.account),
                            ("--qos", args.qos), ("--constraint", args.constraint),
                            ("--slurm-dir", args.slurm_dir), ("--dry-run", args.dry_run)):
            if value:
                check_script_text(flag, value, path=flag in ("--slurm-dir", "--dry-run"))
        for value in args.sbatch_option:
            check_script_text("--sbatch-option", value, option=True)
    except SlurmError as exc:
        raise UserError(str(exc)) from None
    if args.gpus_per_node < 0:
        raise UserError(f"--gpus-per-node {args.gpus_per_node}: must be >= 0")
    image = args.container_image
    if image and (image.startswith("-") or any(ord(c) < 33 for c in image)):
        raise UserError(f"--container-image {image!r}: not an image name or .sif path (it "
                        "would be read as an engine option)")


def cmd_run(args: argparse.Namespace) -> int:
    from harness import experiment, sweep
    from harness.store import Store

    for flag, path in (("--csv", args.csv), ("--report", args.report)):
        if path and Path(path).is_dir():  # say so now, not after hours of measuring
            raise UserError(f"{flag} {path}: is a folder; give a file path, e.g. "
                            f"{Path(path) / ('runs.csv' if flag == '--csv' else 'report.html')}")
    if args.ignore_memory_check:
        from frameworks.contract import MEMORY_CHECK_OFF

        os.environ[MEMORY_CHECK_OFF] = "1"  # workers validate their spec too
    overrides = _spec_overrides(args)
    if args.experiment:
        exp = experiment.load(args.experiment, overrides)
    else:
        if "framework" not in overrides or "model" not in overrides:
            raise UserError("give --experiment FILE, or both --framework and --model "
                            "(see dnnbench run --help)")
        exp = experiment.from_dict({"name": args.name or "adhoc"}, "command line", overrides,
                                   strict=True)
    if args.name:
        exp = experiment.Experiment(experiment.check_name(args.name, "--name"),
                                    exp.description, exp.runs, exp.source, exp.slurm)
    _check_slurm_args(args)
    from runners.slurm import SlurmOptions

    # the experiment file's [slurm] table, each flag given on the command line over it
    site = exp.slurm
    slurm_opts = SlurmOptions(partition=args.partition or site.get("partition", ""),
                              account=args.account or site.get("account", ""),
                              qos=args.qos or site.get("qos", ""),
                              constraint=args.constraint or site.get("constraint", ""),
                              extra=list(site.get("sbatch_options", [])) + args.sbatch_option,
                              workdir=args.slurm_dir,
                              gpus_per_node=args.gpus_per_node or site.get("gpus_per_node", 0),
                              queue_wait_s=site.get("queue_wait_s", 3600.0))
    if args.submit and args.dry_run:
        raise UserError("--submit and --dry-run: give one (--dry-run writes the scripts "
                        "only, --submit submits them)")
    if args.submit:
        return _submit(exp, args, slurm_opts)
    if args.dry_run:
        from runners.slurm import SlurmError

        if Path(args.dry_run).exists() and not Path(args.dry_run).is_dir():
            raise UserError(f"--dry-run {args.dry_run}: exists and is not a folder; give a "
                            "folder for the sbatch scripts")
        if not exp.runnable:
            reasons = sorted({p.skip_reason for p in exp.runs})
            raise UserError(f"--dry-run: no runnable run to write a script for; every run "
                            f"is skipped: {'; '.join(reasons)}")
        try:
            paths = sweep.write_sbatch_scripts(exp, args.dry_run, slurm_opts,
                                               sweep_options(args))
        except SlurmError as exc:
            raise UserError(str(exc)) from None
        for p in paths:
            print(p)
        print(f"{len(paths)} sbatch scripts written to {args.dry_run} (nothing submitted)")
        return 0
    print(f"experiment {exp.name}: {len(exp.runs)} runs "
          f"({len(exp.runs) - len(exp.runnable)} skipped as not runnable here: unsupported, or "
          f"more memory than this host has); results -> {args.db}")
    with Store(args.db) as store:
        summary = sweep.run_experiment(exp, store, retry_failed=args.retry_failed,
                                       remeasure_disturbed=args.remeasure_disturbed,
                                       stream_output=args.verbose,
                                       telemetry_interval_s=args.telemetry_interval,
                                       slurm_options=slurm_opts,
                                       container_options=sweep.ContainerOptions(
                                           args.container_engine, args.container_image))
        print(f"done: {summary.ok} ok, {summary.failed} failed, {summary.skipped} skipped, "
              f"{summary.reused} already stored")
        if summary.slow_cpu:
            print(f"work meter: {len(summary.slow_cpu)} small run(s) read slow ("
                  f"{workmeter.words()}): " + "; ".join(summary.slow_cpu)
                  + ". The same command with --remeasure-disturbed measures them again")
        if args.csv:
            from harness import export

            export.write_csv(store, args.csv, exp.name)
            print(f"CSV: {args.csv}")
    if args.report:
        from reports.render import render_file

        path = render_file(args.db, args.report)
        print(f"report: {path}")
    if summary.interrupted:
        return 128 + summary.signal  # 130 after Ctrl-C, 143 after SIGTERM
    return 1 if summary.failed and not summary.ok else 0


def sweep_options(args: argparse.Namespace):
    from harness.sweep import ContainerOptions

    return ContainerOptions(args.container_engine, args.container_image)


def _submit(exp, args: argparse.Namespace, slurm_opts) -> int:
    from harness import submit
    from harness.store import Store
    from runners.slurm import SlurmError

    for flag in ("csv", "report", "remeasure_disturbed"):
        if getattr(args, flag):
            raise UserError(f"--{flag.replace('_', '-')} does not go with --submit: nothing "
                            "is measured yet (use it with dnnbench collect's database: "
                            "dnnbench results / report --db ...)")
    print(f"experiment {exp.name}: {len(exp.runs)} runs; submitting to Slurm, jobs and "
          f"results -> {args.db}")
    with Store(args.db) as store:
        try:
            s = submit.submit_experiment(exp, store, slurm_opts, args.retry_failed,
                                         out=sys.stdout,
                                         container_options=sweep_options(args))
        except (SlurmError, submit.SubmitError) as exc:
            raise UserError(str(exc)) from None
    print(f"submitted {s.runs} runs in {len(s.jobs)} jobs"
          + (f"; {s.in_flight} submitted earlier, not collected yet" if s.in_flight else "")
          + (f"; {s.stored} already stored" if s.stored else "")
          + (f"; {s.failed} refused (stored as failed)" if s.failed else "")
          + (f"; {s.skipped} skipped" if s.skipped else ""))
    if s.runs or s.in_flight:
        print(f"next: dnnbench status --db {args.db}; dnnbench collect --db {args.db} "
              "[--wait] (any time, from any login shell: the jobs' output files hold the "
              "results)")
    return 1 if s.failed and not s.runs else 0


def cmd_collect(args: argparse.Namespace) -> int:
    from harness import submit
    from harness.store import Store
    from runners.slurm import SlurmError

    if not Path(args.db).is_file():
        raise UserError(f"--db {args.db}: no such results database (give the --db that "
                        "run --submit used)")
    with Store(args.db) as store:
        if not store.jobs("WHERE collected IS NULL" + (" AND experiment = ?" if
                                                       args.experiment else ""),
                          (args.experiment,) if args.experiment else ()):
            print("nothing to collect: every submitted job is stored"
                  + (f" (experiment {args.experiment})" if args.experiment else ""))
            return 0
        try:
            s = submit.collect(store, args.experiment, wait=args.wait, poll_s=args.poll,
                               out=sys.stdout)
        except SlurmError as exc:
            raise UserError(f"cannot ask Slurm how the jobs are: {exc}; jobs stay "
                            "uncollected (nothing was stored for them)") from None
    stored = ", ".join(f"{n} {k}" for k, n in sorted(s.stored.items())) or "nothing new"
    left = ", ".join(f"{n} {k.lower()}" for k, n in sorted(s.waiting.items()))
    print(f"stored: {stored}" + (f"; still in Slurm: {left} (collect again later, or "
                                  "--wait)" if left else ""))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from harness import submit
    from harness.store import Store
    from runners.slurm import SlurmError

    if not Path(args.db).is_file():
        raise UserError(f"--db {args.db}: no such results database")
    with Store(args.db) as store:
        try:
            rows = submit.status(store, args.experiment)
        except SlurmError as exc:
            raise UserError(f"cannot ask Slurm how the jobs are: {exc}") from None
    if not rows:
        print("no submitted jobs in this database (dnnbench run ... --launcher slurm "
              "--submit)")
        return 0
    print(f"{'experiment':<24} {'pending':>8} {'running':>8} {'ended':>8} {'collected':>10}"
          f" {'ok':>5} {'not ok':>7}")
    for r in rows:
        print(f"{r['experiment']:<24} {r['pending']:>8} {r['running']:>8} {r['ended']:>8} "
              f"{r['collected']:>10} {r['ok']:>5} {r['failed']:>7}")
    if any(r["ended"] for r in rows):
        print("ended jobs are stored by: dnnbench collect --db " + args.db)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports.render import render_file

    require_file(args.db)
    default = {"html": "results/report.html", "md": "results/report.md",
               "csv": "results/report-csv"}[args.format]
    path = render_file(args.db, args.output or default, args.experiment, args.format)
    print(f"report: {path}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from harness import export
    from harness.store import Store

    require_file(args.db)
    filters = {k: getattr(args, k) for k in export.FILTERS if k != "experiment"}
    with Store(args.db, readonly=True) as store:
        if args.trace:
            from harness import trace

            try:
                print(f"trace: {trace.write(store, args.trace, args.output)}")
            except trace.TraceError as exc:
                raise UserError(str(exc)) from None
            return 0
        if args.csv:
            export.write_csv(store, args.csv, args.experiment, **filters)
            print(f"CSV: {args.csv}")
        if args.json:
            export.write_json(store, args.json, args.experiment, **filters)
            print(f"JSON: {args.json}")
        if not (args.csv or args.json or args.verdicts or args.scaling or args.intervals):
            export.print_table(store, args.experiment, **filters)
    if args.verdicts:
        from harness import results

        table = results.verdicts(results.load(args.db, args.experiment),
                                 mode=args.mode or "throughput")
        if table.empty:
            print("no pair of frameworks measured with the same network and settings")
        for v in table.to_dict("records"):
            interval = ("no 95% interval" if v["low"] != v["low"] or v["low"] is None else
                        f"[{v['low']:+.1%}, {v['high']:+.1%}]")
            how = (f"paired, {v['rounds']} rounds" if v["method"] == "paired"
                   else "independent runs")
            print(f"{v['model']} {v['config']}: {v['faster']} vs {v['slower']} "
                  f"{v['speedup']:+.1%} {interval} ({how}): "
                  + ("faster" if v["confident"] else "too close to rank"))
    for flag, fn, empty in (("scaling", "scaling", "no multi-worker runs"),
                            ("intervals", "intervals", "no successful runs")):
        if getattr(args, flag):
            from harness import results

            frame = getattr(results, fn)(results.load(args.db, args.experiment))
            print(frame.to_string(index=False, float_format=lambda x: f"{x:.4g}")
                  if not frame.empty else empty)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    if args.data_command == "make":
        from harness.datasets import make

        step = max(1, args.images // 10)

        def progress(done: int, total: int) -> None:
            if done % step == 0 and done < total:
                print(f"  {done}/{total} images written", flush=True)

        info = make(args.directory, args.images, args.size, args.classes, args.seed,
                    progress=progress)
        print(f"{info['root']}: {info['images']} JPEG images in {info['classes']} classes, "
              f"{info['bytes'] / 2**20:.1f} MiB, {info['seconds']} s")
        return 0
    if args.data_command == "check":
        import json

        from frameworks.datasets import list_files
        from harness import datacheck

        list_files(args.directory)  # a clear error before any environment starts
        fws = [f.strip() for f in args.frameworks.split(",") if f.strip()]
        results = datacheck.check(args.directory, fws, args.image_size, args.world,
                                  args.loader_workers)
        lines, agree = datacheck.describe(results)
        print("\n".join(lines))
        if args.json:
            Path(args.json).write_text(json.dumps(
                [{"framework": r.framework, "ok": r.ok, "reason": r.reason, "ranks": r.ranks}
                 for r in results], indent=1))
        return 0 if agree else 1
    raise UserError("data needs an action: make or check (see dnnbench data --help)")


def _reap_containers() -> list[str]:
    import shutil

    from runners import container

    return [name for engine in container.DAEMON_ENGINES if shutil.which(engine)
            for name in container.reap(engine)]


def cmd_compare(args: argparse.Namespace) -> int:
    from harness import compare

    pairs = compare.compare(args.a, args.b, args.experiment)
    if not pairs:
        raise UserError(f"no successful runs to compare in {args.a} or {args.b}"
                        + (f" for experiment {args.experiment!r}" if args.experiment else ""))
    print(compare.table(pairs, args.a, args.b))
    counts = {v: sum(p.verdict == v for p in pairs) for v in
              ("within noise", "faster", "slower", "no interval (too few samples)", "only in A",
               "only in B")}
    print(", ".join(f"{n} {v}" for v, n in counts.items() if n))
    return 1 if args.fail_on_slower and counts["slower"] else 0


def cmd_history(args: argparse.Namespace) -> int:
    from harness import repeat
    from harness.manifest import host_manifest

    path = repeat.default_path()
    if args.clear:
        path.unlink(missing_ok=True)
        print(f"history cleared: {path}")
        return 0
    for db in args.add:  # every path before any is added: a typo in the last adds nothing
        require_file(db)
    with repeat.History(path) as hist:
        for db in args.add:
            print(f"{db}: {hist.add_database(db)} runs added")
        here = repeat.host_key({"manifest_json": {"host": host_manifest()}})
        hosts = hist.hosts()
        print(f"history: {path}")
        if not hosts:
            print("no sweeps recorded yet: every `dnnbench run` adds its runs")
        for host, sweeps in sorted(hosts.items()):
            drift = repeat.estimate(hist, host)
            mark = " (this host)" if host == here else ""
            print(f"{host}{mark}: {sweeps} sweeps; " + (
                drift.text() if drift else "no configuration measured in two sweeps yet: "
                "a run's repeat interval needs two sweeps of the same configurations "
                "besides its own"))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from runners import emulated

    reaped = _reap_containers()
    holders = emulated.holders()  # drops the leases of processes that died
    print(f"removed {len(reaped)} container(s) of dnnbench processes that died"
          + (f": {', '.join(reaped)}" if reaped else ""))
    print(f"emulated cluster: {len(holders)} live user(s)"
          + (f" ({', '.join(str(h['pid']) for h in holders)})" if holders else ""))
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from runners import emulated

    try:
        if args.cluster_command == "up":
            c = emulated.up_unless_used(args.hosts, args.link, args.cpus_per_host,
                                        args.memory_per_host * 2**20)
            print(f"{len(c.hosts)} emulated hosts up, link {c.link}: "
                  + ", ".join(f"{h}={a}" for h, a in zip(c.hosts, c.addresses)))
            if c.cpus_per_host:
                print(f"compute per host: {c.cpus_per_host:g} CPUs on cores "
                      + ", ".join(f"{h}={cs}" for h, cs in zip(c.hosts, c.cpusets))
                      + (f", memory {args.memory_per_host} MiB" if c.memory_per_host else ""))
            if c.isolation:
                cpu = c.isolation.get("cpu_ratio")
                print(f"isolation: {c.hosts[0]} runs at {c.isolation['ratio']:.0%} of its "
                      f"lone speed with {c.isolation['neighbours']} greedy processes on the "
                      "other hosts (100%: independent)"
                      + (f"; it keeps {cpu:.0%} of its lone CPU time (below that, the "
                         "hardware is shared: the rest no limit can give back)"
                         if cpu is not None else ""))
        elif args.cluster_command == "down":
            gone = emulated.down_unless_used()
            reaped = _reap_containers()  # a dead sweep's containers inside the hosts
            if reaped:
                print(f"removed {len(reaped)} container(s) left by dnnbench processes that "
                      "died")
            print(f"removed {len(gone)} emulated host(s)" if gone else "no emulated hosts")
        elif args.cluster_command == "status":
            rows = emulated.status()
            if not rows:
                print("no emulated hosts (dnnbench cluster up --hosts N)")
            for r in rows:
                print(f"{r['host']:<8} {r['address']:<11} rate {r['rate']:<9} "
                      + (f"cpus {r['cpus']:g} on {r['cpuset']:<5} " if r.get("cpus") else "")
                      + f"tx {r['tx_bytes']:>12,} B  rx {r['rx_bytes']:>12,} B")
        else:
            raise UserError("cluster needs an action: up, down or status")
    except emulated.ClusterError as exc:
        raise UserError(str(exc)) from None
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    import shlex

    from harness import images

    if args.image_command not in ("build", "base"):
        raise UserError("image needs an action: build or base (see dnnbench image --help)")
    try:
        if args.image_command == "base":
            print(images.ensure_base(images.engine("auto")))
            return 0
        variant = "cuda" if args.cuda else "cpu"
        if args.dry_run:
            name = "podman" if args.engine == "auto" else args.engine
            base = images.base_tag() if args.base_image == "local" else args.base_image
            print(images.redact(" ".join(shlex.quote(c) for c in images.build_command(
                args.framework, variant, name, base, images.pip_settings(),
                "<private pip.conf>", horovod=False if args.no_horovod else None))))
            return 0
        name = images.engine(args.engine)
        base = images.ensure_base(name) if args.base_image == "local" else args.base_image
        print(images.ensure(args.framework, variant, name, base, rebuild=args.rebuild,
                            horovod=False if args.no_horovod else None))
    except images.ImageError as exc:
        raise UserError(str(exc)) from None
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from harness import experiment
    from harness.sweep import describe

    given = {f for f in (args.experiment_file, args.experiment_flag) if f}
    if len(given) != 1:
        raise UserError("plan: give one experiment file, as `dnnbench plan FILE` or "
                        "`dnnbench plan -e FILE`" + (f" (got {' and '.join(sorted(given))})"
                                                     if given else ""))
    exp = experiment.load(given.pop(), _spec_overrides(args))
    stored: dict[str, str] = {}
    if args.db and Path(args.db).exists():  # a new file: nothing stored yet, as for `run`
        from harness.store import Store

        with Store(args.db, readonly=True) as store:
            stored = {r["config_hash"]: r["status"] for r in store.runs(
                "WHERE experiment = ?", (exp.name,))}
    keep = resumed(args.retry_failed)
    done = {p.spec.config_hash() for p in exp.runs if stored.get(p.spec.config_hash()) in keep}
    unsupported = sum(1 for p in exp.runs if p.skip_reason and p.spec.config_hash() not in done)
    todo = len(exp.runs) - len(done) - unsupported
    print(f"experiment {exp.name} ({exp.source}): {len(exp.runs)} runs, {todo} to measure, "
          + (f"{len(done)} already stored, " if args.db else "")
          + f"{unsupported} skipped as not runnable here (unsupported, or more memory "
          "than this host has)")
    if exp.description:
        print(f"  {exp.description}")
    budget = 0.0
    for i, p in enumerate(exp.runs, start=1):
        state = stored.get(p.spec.config_hash())
        mark = ("skip" if p.skip_reason else "run") if not state else \
            f"stored ({state})" + ("" if state in keep else ", runs again")
        line = f"{i:>4}. [{mark}] {describe(p.spec)}"
        if p.skip_reason:
            line += f": {p.skip_reason}"
        elif p.spec.config_hash() not in done:
            budget += p.spec.timeout_s
        print(line)
    print(f"time limit if every run used its whole timeout: {budget / 60:.0f} min")
    return 0


def _int_list(text: str, what: str, high: int = 1_000_000, most: int = 4096) -> list[int]:
    """A comma list (1,2,4) or a range (1..64) of whole numbers in 1..high, at most `most`
    of them."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            values = range(lo, hi + 1)
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what} = {text!r}: give a comma list (1,2,4) or a range (1..64)") \
            from None
    if not values or len(values) > most or min(values) < 1 or max(values) > high:
        raise UserError(f"{what} = {text!r}: give 1 to {most:,} whole numbers from 1 to "
                        f"{high:,}")
    return list(values)


def cmd_predict(args: argparse.Namespace) -> int:
    from harness.perfmodel import network
    from harness.perfmodel import predict as pm
    from harness.perfmodel.measured import NoMeasurement, compute_from_mfu, compute_from_store
    from harness.perfmodel.validate import checks, median_abs_error
    from harness.store import Store, StoreError
    from models.cost import cost

    workers = _int_list(args.workers, "--workers") if args.workers else None
    dbs = args.db or [DEFAULT_DB]
    if len(dbs) > 1 and not args.holdout:
        raise UserError(f"--db given {len(dbs)} times: several databases are repeats of one "
                        "sweep, for --validate --holdout only; give one --db")
    args.db = dbs[0]

    if args.links:
        for lk in network.links().values():
            print(f"{lk.name:<11} alpha {lk.alpha * 1e6:>7.1f} us  {lk.bandwidth / 1e9:>7.2f} GB/s"
                  f"  {lk.description}")
        return 0
    if args.holdout and not args.validate:
        raise UserError("--holdout is a kind of --validate: use --validate --holdout")
    if args.pooled_links and not args.holdout:
        raise UserError("--pooled-links chooses how --holdout fits links: use --validate "
                        "--holdout --pooled-links")
    if args.median_fit and not (args.holdout and len(dbs) > 1):
        raise UserError("--median-fit fits on the median of several repeats' small runs: "
                        "use --validate --holdout with --db once per repeat (two or more)")
    if args.replicate is not None and not (args.holdout and len(dbs) == 1):
        raise UserError("--replicate chooses which replicate of one sweep --holdout fits "
                        "and judges: use --validate --holdout with one --db")
    if args.server_requests and not args.holdout:
        raise UserError("--server-requests chooses how --holdout fits the servers' CPU: use "
                        "--validate --holdout --server-requests")
    if args.worker_wire and not args.holdout:
        raise UserError("--worker-wire chooses how --holdout fits the workers' CPU: use "
                        "--validate --holdout --worker-wire")
    if args.packet_work and not args.holdout:
        raise UserError("--packet-work chooses how --holdout fits the processes' CPU: use "
                        "--validate --holdout --packet-work")
    if args.validate:
        require_file(args.db)
        if args.holdout and len(dbs) > 1:
            from harness.perfmodel import holdout, holdout_repeats

            try:
                rep = holdout_repeats.validate(dbs, args.experiment, pooled=args.pooled_links,
                                               median_fit=args.median_fit,
                                               requests=args.server_requests,
                                               worker_wire=args.worker_wire,
                                               packet_work=args.packet_work)
            except (holdout.HoldoutError, StoreError) as exc:
                raise UserError(str(exc)) from None
            print(holdout_repeats.table(rep))
            return 0 if all(v["pass"] for v in rep.median.by_strategy().values()) else 1
        if args.holdout:
            from harness.perfmodel import holdout

            with Store(args.db, readonly=True) as store:
                try:
                    result = holdout.validate(store, args.experiment,
                                              pooled=args.pooled_links,
                                              replicate=args.replicate,
                                              requests=args.server_requests,
                                              worker_wire=args.worker_wire,
                                              packet_work=args.packet_work)
                except holdout.HoldoutError as exc:
                    raise UserError(str(exc)) from None
            print(holdout.table(result))
            return 0 if all(v["pass"] for v in result.by_strategy().values()) else 1
        with Store(args.db, readonly=True) as store:
            cs = checks(store, args.experiment, intra=args.intra, inter=args.link)
        if not cs:
            print("no stored run the model can check (needs throughput runs with a matching "
                  "breakdown run, or multi-worker runs)")
            return 0
        print(f"{'configuration':<46} {'measured':>10} {'predicted':>10} {'error':>8}")
        for c in cs:
            print(f"{c.label:<46} {c.measured * 1e3:>8.1f}ms {c.predicted * 1e3:>8.1f}ms "
                  f"{c.error:>+8.1%}")
        print(f"median absolute error: {median_abs_error(cs):.1%} over {len(cs)} runs "
              "(target <= 10%)")
        return 0
    for name in (args.link, args.intra):
        network.link(name)
    net = cost(args.model, args.image_size)
    if args.t_forward is not None or args.t_backward is not None:
        if args.t_forward is None or args.t_backward is None:
            raise UserError("give both --t-forward and --t-backward (seconds per iteration)")
        compute = pm.Compute(args.t_forward, args.t_backward, args.t_update,
                             source="given on the command line")
    elif args.device_preset:
        compute = pm.Compute.from_flops(net, args.batch, args.device_preset)
    else:
        if not Path(args.db).is_file():
            raise UserError(f"no compute times: give --t-forward/--t-backward, --device-preset "
                            f"or a results DB with a single-device run (--db {args.db} does "
                            "not exist)")
        with Store(args.db, readonly=True) as store:
            try:
                compute = compute_from_store(store, args.framework, args.model, args.batch,
                                             args.image_size)
            except NoMeasurement as exc:
                # not measured at this batch or size: the efficiency measured at another
                try:
                    compute = compute_from_mfu(store, args.framework, args.model, args.batch,
                                               args.image_size)
                except NoMeasurement:
                    raise UserError(str(exc)) from None
    fusion = int(args.fusion_mb * 2**20) if args.fusion_mb is not None else None
    scen = pm.Scenario(args.model, args.batch, args.nodes, args.devices_per_node, args.strategy,
                       args.algorithm, args.intra, args.link, not args.no_overlap, fusion,
                       args.ps, args.placement, args.image_size)
    preds = (pm.sweep_workers(scen, compute, workers) if workers
             else [pm.predict(scen, compute)])
    print(f"{'workers':>7} {'nodes':>5} {'t_iter ms':>10} {'images/s':>10} {'eff':>7} "
          f"{'f ms':>8} {'b ms':>8} {'u ms':>7} {'comm ms':>8} {'exposed':>8}")
    for p in preds:
        b = p.breakdown()
        print(f"{p.scenario.workers:>7} {p.scenario.nodes:>5} {p.t_iter * 1e3:>10.1f} "
              f"{p.throughput:>10.1f} {p.efficiency:>7.1%} {b['forward'] * 1e3:>8.1f} "
              f"{b['backward'] * 1e3:>8.1f} {b['update'] * 1e3:>7.1f} {p.t_comm * 1e3:>8.1f} "
              f"{p.t_comm_exposed * 1e3:>8.1f}")
    print("assumptions:")
    for note in preds[-1].assumptions:
        print(f"  - {note}")
    return 0


def cmd_ps_placement(args: argparse.Namespace) -> int:
    from harness.perfmodel.placement import place
    from models.cost import cost

    servers = _int_list(args.ps, "--ps", high=MAX_SERVERS, most=256)

    net = cost(args.model)
    tensors = [(t.key, t.nbytes) for t in net.tensors]
    if args.detail:
        for policy in ("round-robin", "greedy", "mxnet"):
            plc = place(tensors, args.detail, policy, args.model)
            mb = ", ".join(f"{b / 1e6:.1f}" for b in plc.bytes_per_server)
            print(f"{policy:<12} MB per server: {mb}")
        return 0
    if args.db:
        import json

        from harness.store import Store

        require_file(args.db)
        with Store(args.db, readonly=True) as store:
            for r in store.runs("WHERE status = 'ok' AND model = ? AND ps > 0", (args.model,)):
                rec = json.loads(r["manifest_json"] or "{}").get("ranks", {}).get("0", {})
                if rec.get("placement"):
                    per = [0] * max(r["ps"], 1)
                    for _, nbytes, server in rec["placement"]:
                        per[server] += nbytes
                    print(f"recorded by run {r['run_id']} ({r['framework']} {r['strategy']}, "
                          f"{r['ps']} servers): MB per server "
                          f"{', '.join(f'{b / 1e6:.2f}' for b in per)}; imbalance "
                          f"{max(per) / (sum(per) / len(per)):.2f}")
                    if r["framework"] == "mxnet":  # the model's copy of MXNet's rule
                        classes = json.loads(r["spec_json"]).get("num_classes", 1000)
                        run_net = cost(args.model, r["image_size"], classes)
                        m = place([(t.key, t.nbytes) for t in run_net.tensors], max(r["ps"], 1),
                                  "mxnet", args.model)
                        print(f"  the model's mxnet rule for it: MB per server "
                              f"{', '.join(f'{b / 1e6:.2f}' for b in m.bytes_per_server)}")
    print(f"{args.model}: {len(tensors)} tensors, {net.gradient_bytes / 1e6:.1f} MB; largest "
          f"tensor {max(b for _, b in tensors) / 1e6:.2f} MB")
    print(f"{'PS':>4} {'mean MB':>8} {'greedy max':>11} {'imbalance':>10} {'round-robin max':>16} "
          f"{'imbalance':>10} {'mxnet max':>10} {'imbalance':>10} {'floor MB':>9} {'empty':>6}")
    for p in servers:
        g, r = place(tensors, p, "greedy"), place(tensors, p, "round-robin")
        m = place(tensors, p, "mxnet", args.model)
        print(f"{p:>4} {g.total_bytes / p / 1e6:>8.2f} {g.max_bytes / 1e6:>11.2f} "
              f"{g.imbalance:>10.2f} {r.max_bytes / 1e6:>16.2f} {r.imbalance:>10.2f} "
              f"{m.max_bytes / 1e6:>10.2f} {m.imbalance:>10.2f} "
              f"{g.floor_bytes / 1e6:>9.2f} {g.empty_servers:>6}")
    return 0


def cmd_commbench(args: argparse.Namespace) -> int:
    from harness import commbench
    from harness.store import Store

    try:
        sizes = commbench.parse_sizes(args.sizes)
    except commbench.CommbenchError as exc:
        raise UserError(str(exc)) from None
    with Store(args.db) as store:
        for library in [x.strip() for x in args.library.split(",") if x.strip()]:
            try:
                link = "unshaped" if args.hosts and args.link == "local" else args.link
                res = commbench.run(library, args.ranks, sizes, store, args.iters,
                                    args.timeout, link, hosts=args.hosts)
            except (commbench.CommbenchError, RuntimeError) as exc:
                raise UserError(str(exc).splitlines()[0]) from None
            print(f"# {library} {res.rows[0]['op']}, {args.ranks} ranks"
                  + (f" on {args.hosts} emulated hosts" if args.hosts else "")
                  + f", link {res.rows[0]['link']}")
            print(f"{'bytes':>12} {'time us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11} "
                  f"{'#wrong':>7}")
            for r in res.rows:
                print(f"{r['bytes']:>12} {r['median_s'] * 1e6:>11.1f} {r['algbw'] / 1e9:>11.3f} "
                      f"{r['busbw'] / 1e9:>11.3f} {r['wrong']:>7}")
            print(f"# fit: alpha = {res.alpha * 1e6:.1f} us, 1/beta = "
                  f"{1 / res.beta / 1e9 if res.beta else float('inf'):.3f} GB/s\n")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from harness import verify
    from harness.store import Store

    perturb = {}
    for item in args.perturb:
        if ":" not in item:
            raise UserError(f"--perturb {item!r}: give FRAMEWORK:TENSOR, e.g. "
                            "tensorflow:conv1.weight")
        fw, key = item.split(":", 1)
        perturb[fw] = key
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    fws = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    from frameworks.contract import SUPPORT, RunSpec, UnsupportedError, validate

    for fw in fws:
        if fw not in SUPPORT:
            raise UserError(f"unknown framework {fw!r}; known: {', '.join(SUPPORT)}")
    for m in models:
        try:
            validate(RunSpec(fws[0], m, image_size=args.image_size, num_classes=args.classes))
        except UnsupportedError as exc:
            raise UserError(str(exc)) from None
    try:
        results = verify.run(models, fws, args.image_size, args.classes, args.lr,
                             perturb=perturb, echo=lambda s: print(s, file=sys.stderr))
    except verify.VerifyError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    print(verify.table(results))
    if not args.no_store:
        with Store(args.db) as store:
            verify.store_results(store, results, args.image_size)
    failed = [c for c in results if not c.passed]
    print(f"{len(results) - len(failed)} of {len(results)} comparisons pass")
    return 1 if failed else 0


def cmd_paper(args: argparse.Namespace) -> int:
    from harness.perfmodel import papers
    from harness.store import Store

    rep = papers.cori() if args.which == "cori" else papers.shi()
    if args.db:
        require_file(args.db)
        with Store(args.db, readonly=True) as store:
            rep = papers.with_measurements(rep, store.runs("WHERE status = 'ok'"))
    if args.table:
        cols = list(rep.rows[0])
        print("  ".join(f"{c:>10}" for c in cols))
        for r in rep.rows:
            print("  ".join(f"{r[c]:>10.3f}" if isinstance(r[c], float) else f"{r[c]!s:>10}"
                            for c in cols))
        print()
    print(papers.text(rep))
    if args.db and not any(c.basis.startswith("measured") for c in rep.claims):
        print(f"  (no scaling curve in {args.db}: run e.g. dnnbench run -e "
              "experiments/scaling-emulated.toml)")
    return 0


COMMANDS = {"env": cmd_env, "models": cmd_models, "run": cmd_run, "report": cmd_report,
            "results": cmd_results, "predict": cmd_predict, "ps-placement": cmd_ps_placement,
            "paper": cmd_paper, "commbench": cmd_commbench, "plan": cmd_plan,
            "verify": cmd_verify, "data": cmd_data, "cluster": cmd_cluster,
            "image": cmd_image, "clean": cmd_clean, "compare": cmd_compare,
            "history": cmd_history, "collect": cmd_collect, "status": cmd_status}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: `kill PID`, a closed terminal, Slurm ending or preempting the job.
    The sweep stops as it does on Ctrl-C: every process tree it started is torn down and
    every finished run stays stored."""


def _terminated(signum: int, _frame) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    import signal

    expected = user_errors()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `dnnbench plan ... | head` ends quietly
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:  # nohup's ignored SIGHUP stays ignored
            signal.signal(sig, _terminated)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except expected as exc:
        print(f"dnnbench: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not exc.filename:  # not about a path the user gave: a bug, show it
            raise
        print(f"dnnbench: error: {one_line(str(exc.filename))}: {exc.strerror} (check the "
              "path and its permissions)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.args[0] if isinstance(exc, Terminated) else signal.SIGINT
        print(f"dnnbench: {'interrupted' if signum == signal.SIGINT else 'terminated'} "
              f"({signal.Signals(signum).name}); stored results are kept", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
