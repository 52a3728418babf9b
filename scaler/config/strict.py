"""The base of every policy section, and the checks across fields they share (pure).

:class:`Strict` refuses unknown keys, values of the wrong type (a YAML ``"0.8"`` for a number)
and non-finite numbers. The helpers report a check across fields beside the section's own
field errors, in one pass, with messages that read like pydantic's own
(``field.path: value V: expected ...``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails

__all__ = ["Strict", "beside", "error_details", "given", "not_below", "validated_beside"]


class Strict(BaseModel):
    """A policy section: unknown keys refused, values strict and finite, frozen."""

    # strict: a YAML ``true``, ``"yes"`` or ``"0.8"`` is not silently read as a number or a flag;
    # no ``.inf`` or ``.nan``: every number of a policy (seconds, targets, bounds) is finite;
    # each field by its camelCase alias (a VLLMAutoscaler resource's spelling) or its name
    # (snake_case, the first releases')
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        allow_inf_nan=False,
        alias_generator=to_camel,
        populate_by_name=True,
    )


def given(value: Any, *path: str) -> Any:
    """The part at ``path`` of a section as given (mappings or models): an absent key reads
    as an empty mapping (every default); a part that is no mapping is returned as it is, for
    its own validation to refuse."""
    for key in path:
        if isinstance(value, BaseModel):
            value = getattr(value, key)
        elif isinstance(value, dict):
            value = value.get(key, value.get(to_camel(key), {}))
        else:
            return value
    return value


def beside(field: str, problem: Callable[[Any, dict[str, Any]], str | None]) -> Any:
    """A validator of section ``field`` that reports ``problem(section as given, the valid
    earlier fields)``, a check across fields (None: none found), beside the section's own
    field errors: one pass finds both. The message reads like a model validator's
    (``field.path: value V: expected ...``, the path relative to the section)."""

    def check(
        cls: type[BaseModel],
        value: Any,
        handler: ValidatorFunctionWrapHandler,
        info: ValidationInfo,
    ) -> Any:
        found = problem(value, info.data)
        if found is None:
            return handler(value)
        try:
            handler(value)
        except ValidationError as err:
            extra: InitErrorDetails = {
                "type": "value_error",
                "loc": (),
                "input": value,
                "ctx": {"error": ValueError(found)},
            }
            raise ValidationError.from_exception_data(
                err.title, [*error_details(err), extra]
            ) from None
        raise ValueError(found)

    return field_validator(field, mode="wrap")(classmethod(check))


def error_details(err: ValidationError) -> list[InitErrorDetails]:
    """The errors of ``err`` as they can be raised again (with others)."""
    return [
        {"type": e["type"], "loc": e["loc"], "input": e["input"], "ctx": e.get("ctx", {})}
        for e in err.errors()
    ]


def validated_beside(
    model: type[BaseModel], data: Any, handler: Any, extra: list[InitErrorDetails]
) -> Any:
    """``handler(data)`` (a wrap model validator's), raising ``extra`` errors, found on the
    data as given, together with the model's own field errors: one pass reports both."""
    try:
        validated = handler(data)
    except ValidationError as err:
        if not extra:
            raise
        raise ValidationError.from_exception_data(err.title, error_details(err) + extra) from None
    if extra:
        raise ValidationError.from_exception_data(model.__name__, extra)
    return validated


def not_below(field: str, low: str) -> Any:
    """A validator of ``field``: a number >= ``low``, an earlier field of the model. A field
    check, not a model one: it runs beside the other fields' errors, in one pass, whenever
    both are valid."""

    def check(cls: type[BaseModel], value: float, info: ValidationInfo) -> float:
        bound = info.data.get(low)
        if bound is not None and value < bound:
            raise ValueError(f"expected a number >= {low} ({bound:g})")
        return value

    return field_validator(field)(classmethod(check))
