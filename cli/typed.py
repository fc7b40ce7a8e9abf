"""The declared parameters (cli/declare.py) as typer's, for the commands typer runs: the typer path
imports this, the direct path (cli/direct.py) never does."""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from . import declare


@contextlib.contextmanager
def as_typer_errors(this_option: str | None = None) -> Iterator[None]:
    """A declared usage error or exit raised inside, as typer's own (so click reports it)."""
    try:
        yield
    except declare.BadParameter as exc:
        hint = this_option if exc.param_hint == declare.THIS_OPTION else exc.param_hint
        raise typer.BadParameter(exc.message, param_hint=hint) from None
    except declare.Exit as exc:
        raise typer.Exit(exc.exit_code) from None


@functools.cache  # one check per callback and option: the same declaration gives typer the same callback everywhere
def _typer_callback(callback: Callable[[Any], Any], first_name: str) -> Callable[[Any], Any]:
    # One untyped parameter: typer hands it the value alone, as the declared callback takes it.
    def check(value):  # type: ignore[no-untyped-def]  # typer reads the signature: a typed value would be taken for the context
        with as_typer_errors(first_name):
            return callback(value)

    return check


def typer_parameter(parameter: declare.Parameter) -> Any:
    """typer's OptionInfo or ArgumentInfo for a declared parameter."""
    settings = dict(parameter.settings)
    if settings.get("callback") is not None:
        settings["callback"] = _typer_callback(settings["callback"], parameter.names[0] if parameter.names else "")
    if parameter.kind == "argument":
        return typer.Argument(**settings)
    return typer.Option(*parameter.names, **settings)


def typer_signature(declared: inspect.Signature) -> inspect.Signature:
    """The signature with each declared parameter in its annotation made typer's."""
    found = []
    for parameter in declared.parameters.values():
        annotation = parameter.annotation
        if typing.get_origin(annotation) is Annotated:
            base, *metadata = typing.get_args(annotation)
            made = [typer_parameter(item) if isinstance(item, declare.Parameter) else item for item in metadata]
            arguments = (base, *made)
            annotation = Annotated[arguments]  # the tuple is Annotated's arguments
        found.append(parameter.replace(annotation=annotation))
    return declared.replace(parameters=found)
