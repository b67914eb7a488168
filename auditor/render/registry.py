"""The output formats and the renderers, keyed by (report kind, format).

:data:`FORMATS` names each format with the file suffixes that name it (``-o report.sarif``) and
the words ``-o``'s help gives it. A :class:`Renderer` turns one kind of report into one format:
its ``name`` (the format), its ``suffix``, and either :meth:`Renderer.text` (a document) or, for
``table``, :meth:`Renderer.draw` on a rich console. :func:`renderer` finds the renderer of a
kind and a format; :func:`formats` lists the formats of a kind, in the order ``--format``
shows them. Adding a format: one :data:`FORMATS` line, and one :class:`Renderer` per kind that
writes it, registered with :func:`register`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class OutputFormat:
    """One output format: its ``name``, the ``suffixes`` of ``-o`` that name it (the first is its
    own), and ``help``, how ``-o``'s help names its suffix (``.md markdown``)."""

    name: str
    suffixes: tuple[str, ...]
    help: str

    @property
    def suffix(self) -> str:
        """Its own file suffix (``.md``)."""
        return self.suffixes[0]


#: Every output format, in the order the commands list them.
FORMATS: dict[str, OutputFormat] = {f.name: f for f in (
    OutputFormat("table", (".txt",), ".txt table"),
    OutputFormat("json", (".json",), ".json"),
    OutputFormat("markdown", (".md", ".markdown"), ".md markdown"),
    OutputFormat("sarif", (".sarif",), ".sarif"),
    OutputFormat("junit", (".xml",), ".xml JUnit"),
    OutputFormat("html", (".html",), ".html page"),
)}

#: The format each suffix of ``-o`` names (every command that writes a report).
SUFFIX_FORMATS: dict[str, str] = {s: f.name for f in FORMATS.values() for s in f.suffixes}


class Renderer:
    """Renders one kind of report (``KIND``: ``scan``, ``gate``...) in one format (``name``).

    A subclass sets ``KIND`` and ``name`` and implements :meth:`text`, or for ``table``
    :meth:`draw`. ``context`` carries what a format needs beside the report (SARIF: the settings
    file its results are placed on; the scan table: ``verbose``).
    """

    KIND: ClassVar[str] = ""
    name: ClassVar[str] = ""

    @property
    def suffix(self) -> str:
        """The file suffix of its format (:data:`FORMATS`)."""
        return FORMATS[self.name].suffix

    @property
    def draws(self) -> bool:
        """True when it draws on a console (``table``), False when it returns a document."""
        return self.name == "table"

    def text(self, report: Any, **context: Any) -> str:
        """The document of ``report`` in this format.

        Raises:
            NotImplementedError: a renderer that only draws.
        """
        raise NotImplementedError(f"{self.KIND} {self.name} draws on a console")

    def draw(self, report: Any, console: Any, **context: Any) -> None:
        """Print ``report`` on the rich ``console``.

        Raises:
            NotImplementedError: a renderer of a document.
        """
        raise NotImplementedError(f"{self.KIND} {self.name} is a document")


class Registry:
    """Renderers keyed by (report kind, format): one instance of each :class:`Renderer` class."""

    def __init__(self, *classes: type[Renderer]) -> None:
        """Register one renderer per class of ``classes``, under ``(cls.KIND, cls.name)``.

        Raises:
            ValueError: a format :data:`FORMATS` does not know, or a key registered twice.
        """
        self._by_key: dict[tuple[str, str], Renderer] = {}
        for cls in classes:
            key = (cls.KIND, cls.name)
            if cls.name not in FORMATS:
                raise ValueError(f"{cls.__name__}: unknown format {cls.name!r}")
            if key in self._by_key:
                raise ValueError(f"{cls.__name__}: {key} registered twice")
            self._by_key[key] = cls()

    def get(self, kind: str, fmt: str) -> Renderer:
        """The renderer of the report ``kind`` in the format ``fmt``.

        Raises:
            KeyError: no renderer for that pair.
        """
        return self._by_key[(kind, fmt)]

    def formats(self, kind: str) -> tuple[str, ...]:
        """The formats the report ``kind`` is rendered in, in :data:`FORMATS` order."""
        have = {f for k, f in self._by_key if k == kind}
        return tuple(f for f in FORMATS if f in have)

    def kinds(self) -> list[str]:
        """Every report kind that has a renderer, sorted."""
        return sorted({k for k, _ in self._by_key})
