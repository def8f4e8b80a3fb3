"""How the CLI reads input and refuses it: the user-error types, one-line messages, an
argparse that errs in one line, and bounded number types for flags.

The rule for every command: bad input ends in one line on stderr naming the field, the
value and the fix, exit status 2; anything that is not one of `user_errors()` is a bug in
dnnbench and keeps its traceback.
"""

from __future__ import annotations

import argparse
import re
import sys


class UserError(Exception):
    """Shown as one line; the process exits 2."""


#: The most parameter servers any command plans for (a typo like 1..5000000 would
#: otherwise place tensors for minutes).
MAX_SERVERS = 4096


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (what, the value, where help is), exit 2, like
    every other user error; subcommands inherit it."""

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix("dnnbench").strip()  # "" for the top level
        print(f"dnnbench: error: {where + ': ' if where else ''}{one_line(message)} "
              f"(see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """A flag the chosen subcommand does not take is reported by that subcommand, with
        its help to read (argparse leaves it to the top level: "see dnnbench --help")."""
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            self._chosen(ns).error(f"unrecognized arguments: {' '.join(extra)}")
        return ns

    def _chosen(self, ns: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost subcommand parser the parsed arguments picked."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                picked = action.choices.get(getattr(ns, action.dest, None) or "")
                if picked is not None:
                    return picked._chosen(ns) if isinstance(picked, Parser) else picked
        return self


#: A container image reference as registries accept it: [host[:port]/]path[:tag][@digest]
IMAGE_REFERENCE = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


def image_reference(text: str) -> str:
    """An argparse type: a base image name the engine can pull (or 'local'), refused here
    with the rule rather than by the engine after its first build step."""
    if text == "local" or IMAGE_REFERENCE.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not an image reference like python:3.11-slim-bookworm or "
        "docker.io/library/debian:bookworm (lowercase path, optional registry, :tag, "
        "@sha256:digest), nor 'local'")


def number(kind: type, low: float | None = None, high: float | None = None,
           low_open: bool = False):
    """An argparse type: a finite `kind` within [low, high] (or (low, high]), checked by
    the same rule as a RunSpec field's."""
    from frameworks.contract import Field, SpecError

    rule = Field(kind, "", low=low, high=high, low_open=low_open)

    def parse(text: str):
        try:
            return rule.check("value", kind(text))
        except (ValueError, SpecError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {rule.rule()}") from None

    return parse


def field_type(name: str):
    """An argparse type that applies a RunSpec field's declared rule."""
    from frameworks.contract import FIELDS, SpecError, check_field

    kind = FIELDS[name].type

    def parse(text: str):
        try:
            return check_field(name, kind(text))
        except (ValueError, SpecError) as exc:
            raise argparse.ArgumentTypeError(
                str(exc) if isinstance(exc, SpecError)
                else f"{text!r} is not {FIELDS[name].rule()}") from None

    return parse


def one_line(text: str) -> str:
    """The message on one line: control characters a user's value brought in (a newline in
    a path, an escape sequence) are shown escaped, never acted on by the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip())


def user_errors() -> tuple[type[BaseException], ...]:
    """The exception types that mean "the input was wrong" (each message names the field,
    the value and the fix): shown as one line, exit 2. Anything else is a bug in dnnbench
    and keeps its traceback."""
    from frameworks.contract import SpecError
    from frameworks.datasets import DatasetError
    from harness.commbench import CommbenchError
    from harness.compare import CompareError
    from harness.envs import EnvError
    from harness.experiment import ExperimentError
    from harness.perfmodel import ModelInputError
    from harness.perfmodel.measured import NoMeasurement
    from harness.store import StoreError
    from harness.trace import TraceError
    from harness.verify import VerifyError
    from models import UnknownModelError
    from models.cost import ShapeError
    from runners.container import ContainerError
    from runners.emulated import ClusterError
    from runners.horovodrun import HorovodNotFound
    from runners.mpirun import MpiNotFound
    from runners.slurm import SlurmError

    return (UserError, SpecError, ExperimentError, EnvError, ShapeError, UnknownModelError,
            DatasetError, StoreError, NoMeasurement, ModelInputError, TraceError,
            CommbenchError, CompareError, VerifyError, ContainerError, ClusterError, SlurmError,
            HorovodNotFound, MpiNotFound)
