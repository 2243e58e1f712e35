"""A griffe extension for the API reference: a ``typing.NamedTuple`` class gets the signature its
fields give it (``SearchHit(id, book, score, text, rank)``), as griffe gives a dataclass its own."""

from __future__ import annotations

from typing import Any

import griffe


class NamedTuples(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if "__init__" in cls.members or not any(str(base).rsplit(".", 1)[-1] == "NamedTuple" for base in cls.bases):
            return
        fields = [griffe.Parameter(member.name, annotation=member.annotation, kind=griffe.ParameterKind.positional_or_keyword,
                                   default=member.value, docstring=member.docstring)
                  for member in cls.members.values() if isinstance(member, griffe.Attribute) and member.annotation is not None]
        self_ = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
        cls.set_member("__init__", griffe.Function("__init__", lineno=0, endlineno=0, parent=cls,
                                                   parameters=griffe.Parameters(self_, *fields), returns="None"))
